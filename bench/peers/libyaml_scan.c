/*
 * libyaml_scan: raw libyaml event scan, a peer for bosun's config loader bench.
 *
 * Usage: libyaml_scan [--repeat K] FILE...
 *        libyaml_scan [--repeat K] -        (newline-separated paths on stdin)
 *
 * Each pass reads every file fully into memory and runs the libyaml event loop
 * (yaml_parser_parse) to YAML_STREAM_END_EVENT, discarding events; multi-document
 * files are handled naturally since the loop runs to the end of the stream.
 * Prints: files=N events=M ns=T   (T = best wall-clock ns of K passes,
 * CLOCK_MONOTONIC, covering read + parse of all files).
 * Exits 1 with a message naming the file on a read or parse error.
 *
 * Build: cc -O2 -o libyaml_scan libyaml_scan.c -lyaml
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yaml.h>

static void die(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "libyaml_scan: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Read the whole file into *buf (grown as needed); returns its length. */
static size_t read_file(const char *path, unsigned char **buf, size_t *cap) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open %s: %s", path, strerror(errno));
    size_t len = 0;
    for (;;) {
        if (len == *cap) {
            *cap = *cap ? *cap * 2 : 1 << 16;
            *buf = realloc(*buf, *cap);
            if (!*buf) die("out of memory reading %s%s", path, "");
        }
        size_t n = fread(*buf + len, 1, *cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f)) die("cannot read %s: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    return len;
}

/* Parse one in-memory file to STREAM_END; returns the number of events. */
static uint64_t scan(const char *path, const unsigned char *data, size_t len) {
    yaml_parser_t parser;
    yaml_event_t event;
    uint64_t events = 0;
    if (!yaml_parser_initialize(&parser)) die("cannot initialize parser for %s%s", path, "");
    yaml_parser_set_input_string(&parser, data, len);
    for (;;) {
        if (!yaml_parser_parse(&parser, &event)) {
            fprintf(stderr, "libyaml_scan: parse error in %s: %s at line %lu column %lu",
                    path, parser.problem ? parser.problem : "unknown error",
                    (unsigned long)parser.problem_mark.line + 1,
                    (unsigned long)parser.problem_mark.column + 1);
            if (parser.context)
                fprintf(stderr, " (%s at line %lu)", parser.context,
                        (unsigned long)parser.context_mark.line + 1);
            fputc('\n', stderr);
            exit(1);
        }
        events++;
        int done = event.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&event);
        if (done) break;
    }
    yaml_parser_delete(&parser);
    return events;
}

int main(int argc, char **argv) {
    long repeat = 1;
    int i = 1;
    while (i < argc && strncmp(argv[i], "--", 2) == 0) {
        if (strcmp(argv[i], "--") == 0) { i++; break; }
        if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            char *end;
            repeat = strtol(argv[i + 1], &end, 10);
            if (*end || repeat < 1) die("bad --repeat value: %s%s", argv[i + 1], "");
            i += 2;
        } else if (strncmp(argv[i], "--repeat=", 9) == 0) {
            char *end;
            repeat = strtol(argv[i] + 9, &end, 10);
            if (*end || repeat < 1) die("bad --repeat value: %s%s", argv[i] + 9, "");
            i++;
        } else {
            die("unknown option %s%s", argv[i], "");
        }
    }

    char **paths = NULL;
    size_t npaths = 0;
    if (i < argc && strcmp(argv[i], "-") == 0 && i + 1 == argc) {
        size_t cap = 0;
        char *line = NULL;
        size_t lcap = 0;
        ssize_t n;
        while ((n = getline(&line, &lcap, stdin)) != -1) {
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
            if (n == 0) continue;
            if (npaths == cap) {
                cap = cap ? cap * 2 : 1024;
                paths = realloc(paths, cap * sizeof *paths);
                if (!paths) die("out of memory%s%s", "", "");
            }
            paths[npaths++] = strdup(line);
        }
        free(line);
    } else {
        paths = argv + i;
        npaths = (size_t)(argc - i);
    }
    if (npaths == 0) die("usage: libyaml_scan [--repeat K] FILE... | -%s%s", "", "");

    unsigned char *buf = NULL;
    size_t bufcap = 0;
    uint64_t best = UINT64_MAX, events = 0;
    for (long r = 0; r < repeat; r++) {
        uint64_t ev = 0;
        uint64_t t0 = now_ns();
        for (size_t k = 0; k < npaths; k++) {
            size_t len = read_file(paths[k], &buf, &bufcap);
            ev += scan(paths[k], buf, len);
        }
        uint64_t dt = now_ns() - t0;
        if (dt < best) best = dt;
        events = ev;
    }
    printf("files=%zu events=%llu ns=%llu\n", npaths, (unsigned long long)events,
           (unsigned long long)best);
    return 0;
}
