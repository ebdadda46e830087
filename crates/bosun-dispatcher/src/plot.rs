//! `bosun dispatch plan --plot FILE.svg`: a bar chart of each cluster's load
//! against its target. Drawn with plotters' SVG backend and its built-in
//! text metrics, so it needs no font files.

use std::path::Path;

use bosun_dispatch::model::Plan;
use plotters::prelude::*;

/// Why the chart was not written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {message}")]
pub struct PlotError {
    path: String,
    message: String,
}

/// Draws `plan`'s clusters, load beside target, into the SVG file `path`.
pub fn write_svg(plan: &Plan, path: &Path) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let n = plan.clusters.len().max(1);
    let top = plan
        .clusters
        .iter()
        .map(|c| c.load.max(c.target))
        .fold(1.0f64, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (160 + 90 * n as u32, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("bosun dispatch plan, generation {}", plan.generation),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d((0..n as u32).into_segmented(), 0f64..top)
        .map_err(|e| err(&e))?;
    let names: Vec<String> = plan.clusters.iter().map(|c| c.name.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(i) => names.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_desc("demand")
        .draw()
        .map_err(|e| err(&e))?;
    let load = RGBColor(52, 101, 164);
    let target = RGBColor(204, 121, 40);
    // Per cluster, its load in the left half of its segment, its target in
    // the right half.
    let bar = |i: usize, value: f64, right: bool, color: RGBColor| {
        let i = i as u32;
        let (from, to) = if right {
            (SegmentValue::CenterOf(i), SegmentValue::Exact(i + 1))
        } else {
            (SegmentValue::Exact(i), SegmentValue::CenterOf(i))
        };
        let mut r = Rectangle::new([(from, 0.0), (to, value)], color.filled());
        r.set_margin(0, 0, if right { 0 } else { 8 }, if right { 8 } else { 0 });
        r
    };
    chart
        .draw_series(
            plan.clusters
                .iter()
                .enumerate()
                .map(|(i, c)| bar(i, c.load, false, load)),
        )
        .map_err(|e| err(&e))?
        .label("load")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], load.filled()));
    chart
        .draw_series(
            plan.clusters
                .iter()
                .enumerate()
                .map(|(i, c)| bar(i, c.target, true, target)),
        )
        .map_err(|e| err(&e))?
        .label("target")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], target.filled()));
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_dispatch::model::ClusterLoad;

    #[test]
    fn the_chart_names_every_cluster_and_draws_a_bar_pair_each() {
        let plan = Plan {
            generation: 3,
            clusters: ["build01", "build02", "build03"]
                .iter()
                .enumerate()
                .map(|(i, name)| ClusterLoad {
                    name: name.to_string(),
                    capacity: 100,
                    target: 100.0,
                    load: 80.0 + 20.0 * i as f64,
                    relative_load: 0.8 + 0.2 * i as f64,
                })
                .collect(),
            ..Plan::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.svg");
        write_svg(&plan, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        for name in [
            "build01",
            "build02",
            "build03",
            "generation 3",
            "load",
            "target",
        ] {
            assert!(svg.contains(name), "{name} missing");
        }
        // Two bars per cluster, plus the two legend swatches.
        let fills =
            svg.matches("fill=\"#3465A4\"").count() + svg.matches("fill=\"#CC7928\"").count();
        assert_eq!(fills, 2 * 3 + 2, "{svg}");
    }
}
