//! Sums of Prometheus text-format series, for kube-apiserver's `/metrics`.

/// A series' labels.
#[derive(Debug, Default)]
pub struct Labels(Vec<(String, String)>);

impl Labels {
    /// The value of label `name` ("" when the series has none).
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }
}

/// The sum of the samples of `name` whose labels satisfy `keep`.
pub fn sum(text: &str, name: &str, keep: impl Fn(&Labels) -> bool) -> f64 {
    series(text, name)
        .into_iter()
        .filter(|(labels, _)| keep(labels))
        .map(|(_, v)| v)
        .sum()
}

/// Every sample of `name`: its labels and its value.
pub fn series(text: &str, name: &str) -> Vec<(Labels, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (labels, value) = match rest.strip_prefix('{') {
            Some(r) => match r.rsplit_once('}') {
                Some((labels, value)) => (labels, value),
                None => continue,
            },
            None if rest.starts_with(' ') => ("", rest),
            None => continue,
        };
        let labels = Labels(
            parse_labels(labels)
                .into_iter()
                .map(|(n, v)| (n.to_string(), v))
                .collect(),
        );
        if let Some(v) = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        {
            out.push((labels, v));
        }
    }
    out
}

/// `a="x",b="y\"z"` -> [(a, x), (b, y"z)].
fn parse_labels(s: &str) -> Vec<(&str, String)> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some((name, after)) = rest.split_once("=\"") {
        let name = name.trim_start_matches(',').trim();
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        value.push(match n {
                            'n' => '\n',
                            other => other,
                        });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.push((name, value));
        rest = &after[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn sums_matching_series() {
        let text = "# HELP x\n\
            apiserver_request_total{code=\"201\",resource=\"pods\",verb=\"POST\"} 3\n\
            apiserver_request_total{code=\"200\",resource=\"pods\",verb=\"GET\"} 2\n\
            apiserver_request_total{code=\"200\",resource=\"nodes\",verb=\"GET\"} 7\n\
            apiserver_request_total_other{resource=\"pods\"} 100\n";
        let pods = super::sum(text, "apiserver_request_total", |l| {
            l.get("resource") == "pods"
        });
        assert_eq!(pods, 5.0);
        let posts = super::sum(text, "apiserver_request_total", |l| l.get("verb") == "POST");
        assert_eq!(posts, 3.0);
    }
}
