// Command tekton-validate checks PipelineRuns as Tekton's admission webhook
// does: each JSON document on standard input is decoded into
// github.com/tektoncd/pipeline/pkg/apis/pipeline/v1.PipelineRun with unknown
// fields refused (the webhook decodes so), defaulted with SetDefaults and
// checked with Validate, both in a create's context with Tekton's default
// configuration (no config-defaults or feature-flags ConfigMap: the defaults
// Tekton ships).
//
// It prints one JSON line per document, {"ok":true} or
// {"ok":false,"error":"..."}, and exits 1 when any document was refused
// (2 when standard input is not a stream of JSON documents).
//
// bosun's tests run it on every PipelineRun they create; tools/tekton/build.sh
// builds it into a cache outside the clone.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	v1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"knative.dev/pkg/apis"
)

type answer struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// check decodes, defaults and validates one document.
func check(doc json.RawMessage) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return err
	}
	if head.APIVersion != "tekton.dev/v1" || head.Kind != "PipelineRun" {
		return fmt.Errorf("not a tekton.dev/v1 PipelineRun: apiVersion %q, kind %q", head.APIVersion, head.Kind)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	var pr v1.PipelineRun
	if err := dec.Decode(&pr); err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	ctx := apis.WithinCreate(context.Background())
	pr.SetDefaults(ctx)
	if err := pr.Validate(ctx); err != nil {
		return errors.New(err.Error())
	}
	return nil
}

func main() {
	dec := json.NewDecoder(bufio.NewReader(os.Stdin))
	out := json.NewEncoder(os.Stdout)
	refused := false
	for {
		var doc json.RawMessage
		err := dec.Decode(&doc)
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "tekton-validate: standard input: %v\n", err)
			os.Exit(2)
		}
		a := answer{OK: true}
		if err := check(doc); err != nil {
			a = answer{OK: false, Error: err.Error()}
			refused = true
		}
		if err := out.Encode(a); err != nil {
			fmt.Fprintf(os.Stderr, "tekton-validate: %v\n", err)
			os.Exit(2)
		}
	}
	if refused {
		os.Exit(1)
	}
}
