// Every figure reap writes, as standalone SVG text (the sweep's "which N to
// ship" chart, the model card's figures): no plotting library, no fonts to
// embed, and a file that GitHub, Hugging Face and every browser render as it is.
//
// Line charts: one or more panels stacked over a shared x axis. Each panel has
// a left y axis and optionally a right one; a series is drawn against one of
// them, as a polyline with a marker on every point. Axis ranges come from the
// data (with "nice" tick steps); non-finite points are skipped. Vertical marks
// (a chosen N) cross every panel.
//
// Heatmaps: a grid of cells (rows x columns), colour by value, each cell in
// one of two colour ramps (marked: e.g. kept experts; unmarked).
//
// Every plotted number is also in the file, so that a reader (or a test) can
// check the figure against its source: a line chart's markers carry data-x /
// data-y (full precision), a heatmap's rows data-values / data-marked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace reap::util {

struct chart_series {
    std::string         name;            // legend text
    std::vector<double> x, y;            // same length
    bool                right_axis = false;
    bool                bold = false;    // the series the panel is about (thicker line)
    bool                dashed = false;
};

struct chart_panel {
    std::string               y_label;         // left axis
    std::string               y2_label;        // right axis ("" = none)
    std::vector<chart_series> series;
};

// A vertical line across every panel at x, labelled at its top.
struct chart_mark {
    double      x = 0;
    std::string label;
};

struct chart {
    std::string              title;
    std::string              x_label;
    bool                     x_descending = false;  // larger x on the left
    bool                     x_integer = false;     // x is a whole number: ticks at least 1 apart
    std::vector<chart_panel> panels;
    std::vector<chart_mark>  marks;
};

// The colour of a line chart's series named `name` (a calibration domain, say),
// the same in every figure reap draws: the project's domains (en, code, ja, zh,
// de, fr) have fixed, distinct colours, any other name one chosen by a hash of
// it. Within one panel a series whose colour is taken by an earlier one gets
// the next free colour; right-axis series are grey and bold ones black.
const char * series_colour(const std::string & name);

// The size of a file at each x: a dashed series on the right axis of `panel`,
// in the decimal unit of the largest size (util/number_format.h), whose label
// ("file size (GB)") it sets on the panel.
chart_series size_series(const std::vector<double> & xs, const std::vector<uint64_t> & bytes, chart_panel & panel);

// The chart as an SVG document (UTF-8 text; labels are XML-escaped).
// Size: k_chart_width x chart_height(c).
std::string render_svg(const chart & c);

constexpr double k_chart_width = 760;
double chart_height(const chart & c);

struct heatmap {
    std::string              title;
    std::string              x_label;       // under the grid
    std::string              y_label;       // left of the row labels
    std::string              value_label;   // what the colour means (legend)
    std::string              marked_label;  // legend of the marked ramp ("kept")
    std::string              unmarked_label;
    std::vector<std::string> row_labels;    // one per row, top to bottom
    size_t                   n_cols = 0;
    std::vector<double>      values;        // rows x n_cols, row-major; >= 0 (colour ~ sqrt(v / max))
    std::vector<uint8_t>     marked;        // same size (or empty: nothing marked)
};

// The heatmap as an SVG document of k_chart_width x heatmap_height(h). Adjacent
// cells of a row with the same colour are drawn as one rectangle, so the file
// stays small for 92 x 896 grids. Each row is a <g> with data-row (its label),
// data-values (every value, full precision) and data-marked (0/1 per cell).
std::string render_heatmap_svg(const heatmap & h);
double heatmap_height(const heatmap & h);

} // namespace reap::util
