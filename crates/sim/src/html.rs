//! A self-contained HTML page for `sim compare --html`: the table, failover
//! time against cluster size, messages against cluster size, and leadership
//! timelines of single runs. Inline SVG, no scripts, no external assets.

use crate::compare::CompareRow;
use crate::report::RunReport;
use crate::spec::Algorithm;
use std::fmt::Write;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 320.0;
const MARGIN: f64 = 56.0;

fn color(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::Raft => "#1f77b4",
        Algorithm::Bully => "#d62728",
        Algorithm::Ring => "#2ca02c",
        Algorithm::Paxos => "#9467bd",
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The whole page.
pub fn page(rows: &[CompareRow], timelines: &[RunReport]) -> String {
    let mut out = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>bellwether: election algorithms compared</title>\
         <style>body{font:14px system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}\
         svg{background:#fff;border:1px solid #ddd;margin:8px 0}</style></head><body>\
         <h1>Raft, Bully, Ring and Multi-Paxos, measured</h1>\
         <p>Deterministic simulation: 1 ms ticks, one-way latency 1–5 ms, heartbeat 50 ms, election timeout 150–300 ms. \
         Failover = leader crash until every running node follows one new leader. \
         Split brain = two running nodes acting as leader at the same instant, counted in the partition profile.</p>",
    );
    out += &table(rows);
    let sizes: Vec<usize> = unique_sizes(rows);
    out += &line_chart(
        "Failover time p50 (ms, log scale), with connection-loss hints",
        &sizes,
        rows,
        |r| r.failover_ms_p50,
    );
    out += &line_chart(
        "Silent failover time p50 (ms, log scale), no hints",
        &sizes,
        rows,
        |r| r.silent_failover_ms_p50,
    );
    out += &line_chart(
        "Messages per failover election p50 (log scale)",
        &sizes,
        rows,
        |r| r.messages_per_election_p50,
    );
    for report in timelines {
        out += &timeline(report);
    }
    out += "</body></html>\n";
    out
}

fn unique_sizes(rows: &[CompareRow]) -> Vec<usize> {
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.nodes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

fn table(rows: &[CompareRow]) -> String {
    let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let mut out = String::from(
        "<table><tr><th>algorithm</th><th>nodes</th><th>runs</th><th>election p50</th><th>failover p50</th>\
         <th>failover p99</th><th>silent failover p50</th><th>messages/election p50</th>\
         <th>split-brain runs /1000</th><th>entries fetched by a new leader, max</th><th>fairness (Jain)</th>\
         <th>failed runs</th></tr>",
    );
    for r in rows {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.algorithm.as_str(),
            r.nodes,
            r.runs,
            cell(r.election_ms_p50),
            cell(r.failover_ms_p50),
            cell(r.failover_ms_p99),
            cell(r.silent_failover_ms_p50),
            cell(r.messages_per_election_p50),
            r.split_brain_runs_per_1000,
            r.catch_up_entries_max
                .map_or("-".to_string(), |m| m.to_string()),
            r.fairness_jain.map_or("-".to_string(), |j| format!("{j:.2}")),
            r.failed_runs
        );
    }
    out + "</table>"
}

/// A log-scale line chart with one series per algorithm over `sizes`.
fn line_chart(
    title: &str,
    sizes: &[usize],
    rows: &[CompareRow],
    value: impl Fn(&CompareRow) -> Option<f64>,
) -> String {
    let values: Vec<f64> = rows
        .iter()
        .filter_map(&value)
        .filter(|v| *v > 0.0)
        .collect();
    let (low, high) = values
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(*v), h.max(*v)));
    if values.is_empty() || sizes.is_empty() {
        return format!("<h2>{}</h2><p>no data</p>", escape(title));
    }
    let scale = ChartScale::new(sizes.len(), low, high);
    let mut svg = format!(
        "<h2>{}</h2><svg width=\"{WIDTH}\" height=\"{HEIGHT}\">",
        escape(title)
    );
    size_labels(&mut svg, sizes, &scale);
    value_gridlines(&mut svg, &scale);
    for (k, algorithm) in Algorithm::ALL.iter().enumerate() {
        let points = series_points(*algorithm, sizes, rows, &value, &scale);
        if points.is_empty() {
            continue;
        }
        series(&mut svg, k, *algorithm, &points);
    }
    svg + "</svg>"
}

/// Where a line chart draws things: sizes evenly spaced along x, values on
/// a log scale along y. Kept in one place so that labels, gridlines and
/// series all agree.
struct ChartScale {
    /// How many sizes share the x axis.
    columns: usize,
    /// log10 of the value at the bottom of the plot.
    log_low: f64,
    /// log10 of the value at the top of the plot.
    log_high: f64,
}

impl ChartScale {
    /// The scale for `columns` sizes and positive values from `low` to
    /// `high`: a little room below and above them, and at least a tenth of
    /// a decade tall so that a flat series still has a range.
    fn new(columns: usize, low: f64, high: f64) -> Self {
        let (log_low, log_high) = (
            (low * 0.8).log10(),
            (high * 1.25).log10().max((low * 0.8).log10() + 0.1),
        );
        ChartScale {
            columns,
            log_low,
            log_high,
        }
    }

    /// The x of the `i`-th size.
    fn x(&self, i: usize) -> f64 {
        MARGIN + (WIDTH - 2.0 * MARGIN) * i as f64 / (self.columns.max(2) - 1) as f64
    }

    /// The y of value `v` (positive).
    fn y(&self, v: f64) -> f64 {
        HEIGHT
            - MARGIN
            - (HEIGHT - 2.0 * MARGIN) * (v.log10() - self.log_low) / (self.log_high - self.log_low)
    }
}

/// Writes the x axis labels, `n=<size>` under each column.
fn size_labels(svg: &mut String, sizes: &[usize], scale: &ChartScale) {
    for (i, size) in sizes.iter().enumerate() {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">n={size}</text>",
            scale.x(i),
            HEIGHT - MARGIN + 18.0
        );
    }
}

/// Writes a labelled horizontal gridline at each 1, 2 and 5 times a power
/// of ten inside the scale's range, so that the log axis can be read.
fn value_gridlines(svg: &mut String, scale: &ChartScale) {
    let mut tick = 10f64.powf(scale.log_low.floor());
    while tick <= 10f64.powf(scale.log_high) {
        for factor in [1.0, 2.0, 5.0] {
            let v = tick * factor;
            if v.log10() >= scale.log_low && v.log10() <= scale.log_high {
                let _ = write!(
                    svg,
                    "<line x1=\"{MARGIN}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{v}</text>",
                    WIDTH - MARGIN,
                    MARGIN - 6.0,
                    scale.y(v) + 4.0,
                    y = scale.y(v)
                );
            }
        }
        tick *= 10.0;
    }
}

/// The plotted points of `algorithm`'s series: one per size that has a row
/// with a positive value (a log scale cannot show zero), in size order.
fn series_points(
    algorithm: Algorithm,
    sizes: &[usize],
    rows: &[CompareRow],
    value: &impl Fn(&CompareRow) -> Option<f64>,
    scale: &ChartScale,
) -> Vec<(f64, f64)> {
    sizes
        .iter()
        .enumerate()
        .filter_map(|(i, size)| {
            let row = rows
                .iter()
                .find(|r| r.algorithm == algorithm && r.nodes == *size)?;
            value(row)
                .filter(|v| *v > 0.0)
                .map(|v| (scale.x(i), scale.y(v)))
        })
        .collect()
}

/// Writes one algorithm's series: its line, a dot per point, and its name
/// in the legend's `k`-th row, all in the algorithm's colour.
fn series(svg: &mut String, k: usize, algorithm: Algorithm, points: &[(f64, f64)]) {
    let path: Vec<String> = points
        .iter()
        .map(|(px, py)| format!("{px:.1},{py:.1}"))
        .collect();
    let _ = write!(
        svg,
        "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>",
        path.join(" "),
        c = color(algorithm)
    );
    for (px, py) in points {
        let _ = write!(
            svg,
            "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3\" fill=\"{}\"/>",
            color(algorithm)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{}\">{}</text>",
        WIDTH - MARGIN + 6.0,
        MARGIN + 16.0 * k as f64,
        color(algorithm),
        algorithm.as_str()
    );
}

/// Height of one node's lane in a leadership timeline.
const LANE: f64 = 22.0;

/// One run's leadership: a lane per node, a bar while it acted as leader.
fn timeline(report: &RunReport) -> String {
    let spec = &report.spec;
    let end = (report.simulated_ms * 1000.0).max(1.0);
    let height = MARGIN + LANE * spec.nodes as f64 + 30.0;
    let x = |us: u64| MARGIN + (WIDTH - 2.0 * MARGIN) * us as f64 / end;
    let mut svg = format!(
        "<h2>Leadership timeline: {} · {} nodes · faults {} · seed {}</h2><p>{} split-brain incidents, {:.1} ms with two acting leaders. Bar label = term (Raft) or epoch.</p><svg width=\"{WIDTH}\" height=\"{height}\">",
        spec.algorithm,
        spec.nodes,
        spec.faults,
        spec.seed,
        report.split_brain.len(),
        report.split_brain_ms
    );
    lane_labels(&mut svg, spec.nodes);
    split_brain_bands(&mut svg, report, &x);
    leadership_bars(&mut svg, report, &x);
    let axis = MARGIN / 2.0 + LANE * spec.nodes as f64 + 16.0;
    let _ = write!(
        svg,
        "<text x=\"{MARGIN}\" y=\"{axis:.1}\">0 ms</text><text x=\"{:.1}\" y=\"{axis:.1}\" text-anchor=\"end\">{:.0} ms</text></svg>",
        WIDTH - MARGIN,
        end / 1000.0
    );
    svg
}

/// Writes each lane's name, `n<id>`, left of the lane.
fn lane_labels(svg: &mut String, nodes: usize) {
    for node in 1..=nodes {
        let top = MARGIN / 2.0 + LANE * (node - 1) as f64;
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">n{node}</text>",
            MARGIN - 6.0,
            top + 14.0
        );
    }
}

/// Shades every split-brain incident across all lanes, behind the bars,
/// so that overlapping leaderships stand out. `x` maps µs to x.
fn split_brain_bands(svg: &mut String, report: &RunReport, x: &impl Fn(u64) -> f64) {
    for incident in &report.split_brain {
        let (start, stop) = (
            x(incident.start_us),
            x(incident.end_us.unwrap_or(incident.start_us)),
        );
        let _ = write!(
            svg,
            "<rect x=\"{start:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#fdd\"/>",
            MARGIN / 2.0,
            (stop - start).max(1.0),
            LANE * report.spec.nodes as f64
        );
    }
}

/// Writes a bar per leadership span in its node's lane, with a tooltip,
/// and the term on the bar when it is wide enough to hold it. `x` maps µs
/// to x.
fn leadership_bars(svg: &mut String, report: &RunReport, x: &impl Fn(u64) -> f64) {
    for span in &report.timeline {
        let top = MARGIN / 2.0 + LANE * (span.node - 1) as f64;
        let (start, stop) = (x(span.start_us), x(span.end_us));
        let _ = write!(
            svg,
            "<rect x=\"{start:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\" opacity=\"0.8\"><title>n{} term {} from {:.1} to {:.1} ms</title></rect>",
            top + 3.0,
            (stop - start).max(1.0),
            LANE - 6.0,
            color(report.spec.algorithm),
            span.node,
            span.term,
            span.start_us as f64 / 1000.0,
            span.end_us as f64 / 1000.0
        );
        if stop - start > 18.0 {
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#fff\" font-size=\"11\">{}</text>",
                start + 3.0,
                top + 15.0,
                span.term
            );
        }
    }
}
