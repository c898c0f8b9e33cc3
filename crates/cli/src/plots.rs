//! Plots of one simulator run ([`sim::RunSummary`]), each written as PNG and SVG with plotters:
//! throughput per flow over time, latency per flow over time, the latency CDF per flow, and the
//! flows' shares of the total goodput as a bar chart.
//!
//! Text is rendered with an embedded font (DejaVu Sans Mono, assets/), registered with
//! plotters' `ab_glyph` backend, so PNGs need no system fonts or fontconfig.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;
use sim::RunSummary;
use std::path::{Path, PathBuf};

const FONT: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");
const FAMILY: &str = "sans-serif";
const SIZE: (u32, u32) = (1000, 600);
/// At most this many points per flow in a CDF (keeps SVGs small).
const CDF_POINTS: usize = 1000;

/// The charts drawn for each run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chart {
    /// Goodput of each flow per time bin.
    Throughput,
    /// Mean latency of each flow per time bin.
    Latency,
    /// Empirical CDF of each flow's latency samples.
    LatencyCdf,
    /// Each flow's share of the summed goodput.
    Shares,
}

impl Chart {
    /// Every chart, in file order.
    pub const ALL: [Chart; 4] = [
        Chart::Throughput,
        Chart::Latency,
        Chart::LatencyCdf,
        Chart::Shares,
    ];

    /// File-name suffix (`throughput`, `latency`, `latency-cdf`, `shares`).
    pub fn suffix(self) -> &'static str {
        match self {
            Chart::Throughput => "throughput",
            Chart::Latency => "latency",
            Chart::LatencyCdf => "latency-cdf",
            Chart::Shares => "shares",
        }
    }
}

/// A string safe as a file name: ASCII letters, digits, `-`, `_` and `.` kept, anything else
/// becomes `_`; never empty.
pub fn file_stem(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "run".to_string()
    } else {
        s
    }
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The font is a valid TTF compiled into the binary; if registration ever failed,
        // plotters would report a font error when drawing text, which we return as an error.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

/// Writes every [`Chart`] of `run` into `dir` as `<stem>-<suffix>.png` and `.svg`; returns the
/// paths written.
pub fn write_all(run: &RunSummary, dir: &Path, stem: &str) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for c in Chart::ALL {
        out.extend(write_chart(run, c, dir, stem)?);
    }
    Ok(out)
}

/// Writes one chart as PNG and SVG; returns both paths.
pub fn write_chart(
    run: &RunSummary,
    chart: Chart,
    dir: &Path,
    stem: &str,
) -> Result<Vec<PathBuf>, String> {
    register_font();
    let png = dir.join(format!("{stem}-{}.png", chart.suffix()));
    let svg = dir.join(format!("{stem}-{}.svg", chart.suffix()));
    render(
        &png,
        &svg,
        SIZE,
        &|root: Root<'_, '_>| draw(run, chart, root),
        &|root: SvgRoot<'_, '_>| draw(run, chart, root),
    )
}

/// A PNG drawing area.
type Root<'r, 'b> = &'r DrawingArea<BitMapBackend<'b>, Shift>;
/// An SVG drawing area.
type SvgRoot<'r, 'b> = &'r DrawingArea<SVGBackend<'b>, Shift>;

/// Draws one figure into `png` and `svg` (the same drawing, called once per backend, since a
/// closure cannot be generic over the backend) and returns both paths.
fn render(
    png: &Path,
    svg: &Path,
    size: (u32, u32),
    draw_png: &dyn for<'r, 'b> Fn(Root<'r, 'b>) -> Result<(), String>,
    draw_svg: &dyn for<'r, 'b> Fn(SvgRoot<'r, 'b>) -> Result<(), String>,
) -> Result<Vec<PathBuf>, String> {
    {
        let root = BitMapBackend::new(png, size).into_drawing_area();
        draw_png(&root)?;
        root.present()
            .map_err(|e| format!("{}: {e}", png.display()))?;
    }
    {
        let root = SVGBackend::new(svg, size).into_drawing_area();
        draw_svg(&root)?;
        root.present()
            .map_err(|e| format!("{}: {e}", svg.display()))?;
    }
    Ok(vec![png.to_path_buf(), svg.to_path_buf()])
}

fn e2s<E: std::fmt::Display>(e: E) -> String {
    format!("plot: {e}")
}

/// Upper axis bound: `max` with 5% headroom, at least `floor`.
fn top(max: f64, floor: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        (max * 1.05).max(floor)
    } else {
        floor
    }
}

fn draw<DB: DrawingBackend>(
    run: &RunSummary,
    chart: Chart,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(e2s)?;
    let title = format!("{}: {}", run.name, chart.suffix());
    let caption = (FAMILY, 22).into_font();
    let dur = run.duration_s.max(run.bin_s).max(1e-9);
    match chart {
        Chart::Throughput | Chart::Latency => {
            let throughput = chart == Chart::Throughput;
            // Per flow: (x, y) points; latency bins without deliveries split the line.
            let series: Vec<Vec<Vec<(f64, f64)>>> = run
                .flows
                .iter()
                .map(|f| {
                    let mut segs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
                    if throughput {
                        for (i, v) in f.series.goodput_bps.iter().enumerate() {
                            segs[0].push((i as f64 * run.bin_s, v / 1e6));
                        }
                    } else {
                        for (i, v) in f.series.latency_ms.iter().enumerate() {
                            match v {
                                Some(ms) => {
                                    if let Some(s) = segs.last_mut() {
                                        s.push((i as f64 * run.bin_s, *ms));
                                    }
                                }
                                None => segs.push(Vec::new()),
                            }
                        }
                    }
                    segs
                })
                .collect();
            let ymax = series
                .iter()
                .flatten()
                .flatten()
                .map(|p| p.1)
                .fold(0.0, f64::max);
            let mut c = ChartBuilder::on(root)
                .caption(title, caption)
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(0.0..dur, 0.0..top(ymax, 1.0))
                .map_err(e2s)?;
            c.configure_mesh()
                .x_desc("time (s)")
                .y_desc(if throughput {
                    "goodput (Mbit/s)"
                } else {
                    "latency (ms)"
                })
                .label_style((FAMILY, 14))
                .draw()
                .map_err(e2s)?;
            for (i, (f, segs)) in run.flows.iter().zip(&series).enumerate() {
                let color = Palette99::pick(i).to_rgba();
                let mut first = true;
                for seg in segs.iter().filter(|s| !s.is_empty()) {
                    let a = c
                        .draw_series(LineSeries::new(seg.iter().copied(), color.stroke_width(2)))
                        .map_err(e2s)?;
                    if first {
                        a.label(f.name.clone()).legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                        });
                        first = false;
                    }
                }
            }
            legend(&mut c)?;
        }
        Chart::LatencyCdf => {
            let cdfs: Vec<Vec<(f64, f64)>> = run
                .flows
                .iter()
                .map(|f| {
                    let mut s = f.latency_samples_ms.clone();
                    s.sort_unstable_by(f64::total_cmp);
                    let n = s.len();
                    let step = n.div_ceil(CDF_POINTS).max(1);
                    let mut pts: Vec<(f64, f64)> = (0..n)
                        .step_by(step)
                        .map(|i| (s[i], (i + 1) as f64 / n as f64))
                        .collect();
                    if let Some(&last) = s.last() {
                        pts.push((last, 1.0));
                    }
                    pts
                })
                .collect();
            let xmax = cdfs.iter().flatten().map(|p| p.0).fold(0.0, f64::max);
            let mut c = ChartBuilder::on(root)
                .caption(title, caption)
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(0.0..top(xmax, 1.0), 0.0..1.0)
                .map_err(e2s)?;
            c.configure_mesh()
                .x_desc("latency (ms)")
                .y_desc("fraction of packets")
                .label_style((FAMILY, 14))
                .draw()
                .map_err(e2s)?;
            for (i, (f, pts)) in run.flows.iter().zip(&cdfs).enumerate() {
                if pts.is_empty() {
                    continue;
                }
                let color = Palette99::pick(i).to_rgba();
                c.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                    .map_err(e2s)?
                    .label(f.name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
            }
            legend(&mut c)?;
        }
        Chart::Shares => {
            let total: f64 = run.flows.iter().map(|f| f.goodput_bps).sum();
            let shares: Vec<f64> = run
                .flows
                .iter()
                .map(|f| {
                    if total > 0.0 {
                        f.goodput_bps / total
                    } else {
                        0.0
                    }
                })
                .collect();
            let n = run.flows.len().max(1) as u32;
            let names: Vec<String> = run.flows.iter().map(|f| f.name.clone()).collect();
            let mut c = ChartBuilder::on(root)
                .caption(title, caption)
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d((0u32..n).into_segmented(), 0.0..1.0)
                .map_err(e2s)?;
            c.configure_mesh()
                .disable_x_mesh()
                .x_desc("flow")
                .y_desc("share of total goodput")
                .x_labels(n as usize)
                .x_label_formatter(&|v| match v {
                    SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                        names.get(*i as usize).cloned().unwrap_or_default()
                    }
                    SegmentValue::Last => String::new(),
                })
                .label_style((FAMILY, 12))
                .draw()
                .map_err(e2s)?;
            c.draw_series(shares.iter().enumerate().map(|(i, &s)| {
                let i = i as u32;
                let color = Palette99::pick(i as usize).to_rgba();
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), s),
                    ],
                    color.filled(),
                );
                r.set_margin(0, 0, 8, 8);
                r
            }))
            .map_err(e2s)?;
        }
    }
    Ok(())
}

/// One named line of a [`write_lines`] chart: `(x, y)` points (a NaN `y` splits the line).
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// Legend label.
    pub name: String,
    /// Points in x order.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed-looking (thin) rather than thick.
    pub thin: bool,
}

/// A generic line chart (time series of capacity / shaped rate / throughput, or a latency CDF):
/// writes `<stem>.png` and `<stem>.svg` into `dir` and returns both paths. `y_range` of `None`
/// fits the data (from 0).
pub fn write_lines(
    dir: &Path,
    stem: &str,
    title: &str,
    axes: (&str, &str),
    lines: &[Line],
    y_range: Option<(f64, f64)>,
) -> Result<Vec<PathBuf>, String> {
    register_font();
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    render(
        &png,
        &svg,
        SIZE,
        &|root: Root<'_, '_>| draw_lines(root, title, axes, lines, y_range),
        &|root: SvgRoot<'_, '_>| draw_lines(root, title, axes, lines, y_range),
    )
}

fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    axes: (&str, &str),
    lines: &[Line],
    y_range: Option<(f64, f64)>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(e2s)?;
    let finite = |v: f64| v.is_finite();
    let pts = lines.iter().flat_map(|l| l.points.iter());
    let (mut xmin, mut xmax, mut ymax) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in pts {
        if finite(x) {
            xmin = xmin.min(x);
            xmax = xmax.max(x);
        }
        if finite(y) {
            ymax = ymax.max(y);
        }
    }
    if !(xmin.is_finite() && xmax > xmin) {
        (xmin, xmax) = (0.0, 1.0);
    }
    let (ylo, yhi) = y_range.unwrap_or((0.0, top(ymax, 1.0)));
    let mut c = ChartBuilder::on(root)
        .caption(title, (FAMILY, 22).into_font())
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(xmin..xmax, ylo..yhi)
        .map_err(e2s)?;
    c.configure_mesh()
        .x_desc(axes.0)
        .y_desc(axes.1)
        .label_style((FAMILY, 14))
        .draw()
        .map_err(e2s)?;
    for (i, l) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let w = if l.thin { 1 } else { 2 };
        let mut first = true;
        for seg in l.points.split(|p| !p.1.is_finite() || !p.0.is_finite()) {
            if seg.is_empty() {
                continue;
            }
            let a = c
                .draw_series(LineSeries::new(seg.iter().copied(), color.stroke_width(w)))
                .map_err(e2s)?;
            if first {
                a.label(l.name.clone()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
                first = false;
            }
        }
    }
    legend(&mut c)
}

/// One contender on a [`write_tradeoff`] chart: its seed-median `(latency, throughput)` and
/// optionally its worst seed's, drawn hollow and joined to the median (a whisker).
#[derive(Clone, Debug, PartialEq)]
pub struct Marker {
    /// Legend label.
    pub name: String,
    /// The seed-median point.
    pub median: (f64, f64),
    /// The worst seed's point.
    pub worst: Option<(f64, f64)>,
    /// Drawn as a triangle (the oracles) instead of a circle.
    pub reference: bool,
}

/// A latency-vs-throughput chart with a logarithmic latency axis: every [`Marker`] and one
/// labelled curve (`(x, y, label)` points in order, e.g. a target sweep) named `curve.0`.
/// Writes `<stem>.png` and `<stem>.svg` into `dir` and returns both paths. Latencies below
/// 0.01 ms are drawn at 0.01.
pub fn write_tradeoff(
    dir: &Path,
    stem: &str,
    title: &str,
    axes: (&str, &str),
    markers: &[Marker],
    curve: (&str, &[(f64, f64, String)]),
) -> Result<Vec<PathBuf>, String> {
    register_font();
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    render(
        &png,
        &svg,
        TRADEOFF_SIZE,
        &|root: Root<'_, '_>| draw_tradeoff(root, title, axes, markers, curve),
        &|root: SvgRoot<'_, '_>| draw_tradeoff(root, title, axes, markers, curve),
    )
}

const TRADEOFF_SIZE: (u32, u32) = (1100, 700);

fn draw_tradeoff<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    axes: (&str, &str),
    markers: &[Marker],
    curve: (&str, &[(f64, f64, String)]),
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(e2s)?;
    let floor = |x: f64| x.max(0.01);
    let pts = markers
        .iter()
        .flat_map(|m| std::iter::once(m.median).chain(m.worst))
        .chain(curve.1.iter().map(|p| (p.0, p.1)))
        .filter(|p| p.0.is_finite() && p.1.is_finite());
    let (mut xlo, mut xhi, mut yhi) = (f64::INFINITY, 0.0f64, 0.0f64);
    for (x, y) in pts {
        xlo = xlo.min(floor(x));
        xhi = xhi.max(floor(x));
        yhi = yhi.max(y);
    }
    if !(xlo.is_finite() && xhi > 0.0) {
        (xlo, xhi) = (0.1, 10.0);
    }
    let (xlo, xhi) = (xlo / 1.5, (xhi * 1.5).max(xlo * 3.0));
    let mut c = ChartBuilder::on(root)
        .caption(title, (FAMILY, 20).into_font())
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((xlo..xhi).log_scale(), 0.0..top(yhi, 1.0))
        .map_err(e2s)?;
    c.configure_mesh()
        .x_desc(axes.0)
        .y_desc(axes.1)
        .label_style((FAMILY, 14))
        .draw()
        .map_err(e2s)?;
    let clip = |p: (f64, f64)| (floor(p.0), p.1);
    // The curve first, so the markers stay visible on top.
    let purple = RGBColor(128, 0, 160);
    let line: Vec<(f64, f64)> = curve.1.iter().map(|p| clip((p.0, p.1))).collect();
    if !line.is_empty() {
        c.draw_series(LineSeries::new(line.clone(), purple.stroke_width(2)))
            .map_err(e2s)?
            .label(curve.0.to_string())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], purple.stroke_width(2))
            });
        c.draw_series(line.iter().map(|&p| Circle::new(p, 3, purple.filled())))
            .map_err(e2s)?;
        c.draw_series(curve.1.iter().map(|p| {
            Text::new(
                p.2.clone(),
                clip((p.0, p.1)),
                (FAMILY, 12).into_font().color(&purple),
            )
        }))
        .map_err(e2s)?;
    }
    for (i, m) in markers.iter().enumerate() {
        if !(m.median.0.is_finite() && m.median.1.is_finite()) {
            continue;
        }
        let color = Palette99::pick(i).to_rgba();
        let at = clip(m.median);
        if let Some(w) = m.worst.filter(|w| w.0.is_finite() && w.1.is_finite()) {
            let w = clip(w);
            c.draw_series(std::iter::once(PathElement::new(
                vec![at, w],
                color.stroke_width(1),
            )))
            .map_err(e2s)?;
            if m.reference {
                c.draw_series(std::iter::once(TriangleMarker::new(
                    w,
                    6,
                    color.stroke_width(2),
                )))
                .map_err(e2s)?;
            } else {
                c.draw_series(std::iter::once(Circle::new(w, 5, color.stroke_width(2))))
                    .map_err(e2s)?;
            }
        }
        if m.reference {
            c.draw_series(std::iter::once(TriangleMarker::new(at, 8, color.filled())))
                .map_err(e2s)?
                .label(m.name.clone())
                .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 6, color.filled()));
        } else {
            c.draw_series(std::iter::once(Circle::new(at, 6, color.filled())))
                .map_err(e2s)?
                .label(m.name.clone())
                .legend(move |(x, y)| Circle::new((x + 10, y), 5, color.filled()));
        }
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FAMILY, 13))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(e2s)
}

/// An empirical CDF of `samples` as at most 1000 `(value, fraction)` points.
pub fn cdf_points(samples: &[f64]) -> Vec<(f64, f64)> {
    let mut s: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    s.sort_unstable_by(f64::total_cmp);
    let n = s.len();
    let step = n.div_ceil(CDF_POINTS).max(1);
    let mut pts: Vec<(f64, f64)> = (0..n)
        .step_by(step)
        .map(|i| (s[i], (i + 1) as f64 / n as f64))
        .collect();
    if let Some(&last) = s.last() {
        pts.push((last, 1.0));
    }
    pts
}

fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    c: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    c.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font((FAMILY, 13))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e2s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stem_replaces_unsafe_characters() {
        assert_eq!(file_stem("r->b (fwd)"), "r-_b__fwd_");
        assert_eq!(file_stem(""), "run");
        assert_eq!(file_stem("A1.cake"), "A1.cake");
    }
}
