//! Charts as inline SVG, made on the server (no script draws them): a
//! histogram (the periodics' timeline) and horizontal bars with a target
//! mark (load against target, runs against capacity). Colours come from
//! the stylesheet's classes; every text is escaped.

use std::fmt::Write;

/// Escapes text for XML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// A histogram's bar.
pub struct Bar {
    /// Its height.
    pub value: f64,
    /// Written under it (empty: none).
    pub label: String,
    /// Its tooltip.
    pub title: String,
}

/// Vertical bars side by side; the tallest get the class `peak` when they
/// stand out (at least twice the mean of the bars that are not empty).
pub fn histogram(bars: &[Bar], id: &str) -> String {
    let (w, h, top, bottom, left) = (960.0, 170.0, 12.0, 22.0, 34.0);
    let max = bars.iter().map(|b| b.value).fold(0.0, f64::max);
    let filled: Vec<f64> = bars.iter().map(|b| b.value).filter(|v| *v > 0.0).collect();
    let mean = filled.iter().sum::<f64>() / filled.len().max(1) as f64;
    let spike = max >= 2.0 * mean && max >= 2.0;
    let scale = if max > 0.0 {
        (h - top - bottom) / max
    } else {
        0.0
    };
    let step = (w - left) / bars.len().max(1) as f64;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart histogram" id="{}" viewBox="0 0 {w} {h}" role="img" aria-label="{}">"#,
        escape(id),
        escape(&format!("histogram, highest bar {max}"))
    );
    let base = h - bottom;
    let _ = write!(
        out,
        r#"<line class="axis" x1="{left}" y1="{base}" x2="{w}" y2="{base}"/><text class="tick" x="{}" y="{}" text-anchor="end">{max}</text><text class="tick" x="{}" y="{base}" text-anchor="end">0</text>"#,
        left - 4.0,
        top + 8.0,
        left - 4.0,
    );
    for (i, b) in bars.iter().enumerate() {
        let x = left + i as f64 * step;
        let bh = b.value * scale;
        let class = if spike && b.value == max {
            "bar peak"
        } else {
            "bar"
        };
        let _ = write!(
            out,
            r#"<g><title>{}</title><rect class="{class}" x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" data-value="{}"/><rect class="hit" x="{:.1}" y="{top}" width="{:.1}" height="{:.1}"/></g>"#,
            escape(&b.title),
            x + 0.5,
            base - bh,
            (step - 1.0).max(0.5),
            bh,
            b.value,
            x,
            step,
            base - top,
        );
        if !b.label.is_empty() {
            let _ = write!(
                out,
                r#"<line class="axis" x1="{x:.1}" y1="{base}" x2="{x:.1}" y2="{}"/><text class="tick" x="{x:.1}" y="{}">{}</text>"#,
                base + 4.0,
                h - 6.0,
                escape(&b.label)
            );
        }
    }
    out.push_str("</svg>");
    out
}

/// A horizontal bar: a value against a scale, with an optional target mark.
pub struct HBar {
    /// The row's name (left).
    pub name: String,
    /// The bar's length.
    pub value: f64,
    /// Where the target mark goes.
    pub target: Option<f64>,
    /// What the value is written as (right).
    pub text: String,
    /// The row's tooltip.
    pub title: String,
    /// A class for the bar (`over`, `idle`, ...).
    pub class: &'static str,
}

/// Horizontal bars, one row each, on a common scale (at least `min_max`).
pub fn hbars(rows: &[HBar], min_max: f64, id: &str) -> String {
    let (w, row_h, left, right) = (760.0, 30.0, 170.0, 170.0);
    let h = row_h * rows.len().max(1) as f64 + 8.0;
    let max = rows
        .iter()
        .flat_map(|r| [r.value, r.target.unwrap_or(0.0)])
        .fold(min_max, f64::max);
    let span = w - left - right;
    let scale = if max > 0.0 { span / max } else { 0.0 };
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart hbars" id="{}" viewBox="0 0 {w} {h}" role="img">"#,
        escape(id)
    );
    for (i, r) in rows.iter().enumerate() {
        let y = 4.0 + i as f64 * row_h;
        let len = (r.value * scale).max(0.0);
        let _ = write!(
            out,
            r#"<g class="row" data-name="{}" data-value="{}" data-target="{}"><title>{}</title><text class="name" x="{}" y="{:.1}" text-anchor="end">{}</text><rect class="track" x="{left}" y="{:.1}" width="{span:.1}" height="{:.1}"/><rect class="bar {}" x="{left}" y="{:.1}" width="{len:.1}" height="{:.1}"/>"#,
            escape(&r.name),
            r.value,
            r.target.map(|t| t.to_string()).unwrap_or_default(),
            escape(&r.title),
            left - 8.0,
            y + row_h / 2.0 + 4.0,
            escape(&r.name),
            y + 5.0,
            row_h - 10.0,
            r.class,
            y + 5.0,
            row_h - 10.0,
        );
        if let Some(t) = r.target {
            let x = left + t * scale;
            let _ = write!(
                out,
                r#"<line class="target" x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}"/>"#,
                y + 1.0,
                y + row_h - 1.0
            );
        }
        let _ = write!(
            out,
            r#"<text class="value" x="{}" y="{:.1}">{}</text></g>"#,
            w - right + 8.0,
            y + row_h / 2.0 + 4.0,
            escape(&r.text)
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_escape_their_text_and_scale_to_the_largest() {
        let bar = |value: f64, title: &str| Bar {
            value,
            label: "00:00".into(),
            title: title.into(),
        };
        let bars = [bar(1.0, "<a> & \"b\""), bar(1.0, "x"), bar(6.0, "y")];
        let s = histogram(&bars, "t");
        assert!(s.contains("&lt;a&gt; &amp; &quot;b&quot;"), "{s}");
        assert!(!s.contains("<a>"));
        assert_eq!(s.matches("bar peak").count(), 1, "a spike stands out");
        let even = histogram(&[bar(2.0, "a"), bar(2.0, "b")], "t");
        assert_eq!(even.matches("peak").count(), 0, "no spike, no peak");
        let rows = [HBar {
            name: "build<1>".into(),
            value: 5.0,
            target: Some(10.0),
            text: "5 / 10".into(),
            title: "t".into(),
            class: "",
        }];
        let s = hbars(&rows, 1.0, "h");
        assert!(s.contains(r#"data-name="build&lt;1&gt;""#), "{s}");
        assert!(s.contains(r#"data-target="10""#), "{s}");
        // The bar is half the target's length.
        assert!(s.contains(r#"width="210.0" height="20.0"/>"#), "{s}");
    }
}
