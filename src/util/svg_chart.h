// Line charts as standalone SVG text, for the plots reap writes itself (the
// sweep's "which N to ship" chart): no plotting library, no fonts to embed,
// and a file that GitHub, Hugging Face and every browser render as it is.
//
// A chart is one or more panels stacked over a shared x axis. Each panel has a
// left y axis and optionally a right one; a series is drawn against one of
// them, as a polyline with a marker on every point. Axis ranges come from the
// data (with "nice" tick steps); non-finite points are skipped.
#pragma once

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

struct chart {
    std::string              title;
    std::string              x_label;
    bool                     x_descending = false;  // larger x on the left
    std::vector<chart_panel> panels;
};

// The chart as an SVG document (UTF-8 text; labels are XML-escaped).
std::string render_svg(const chart & c);

} // namespace reap::util
