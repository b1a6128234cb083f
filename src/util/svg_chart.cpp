// Line charts and heatmaps as SVG text (see svg_chart.h).
#include "util/svg_chart.h"
#include "util/text_escape.h"

#include "util/number_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace reap::util {

namespace {

constexpr double k_width    = k_chart_width;
constexpr double k_panel_h  = 250;
constexpr double k_left     = 78;   // room for the left axis labels
constexpr double k_right    = 86;   // and the right ones
constexpr double k_top      = 70;   // title and the legend row
constexpr double k_gap      = 46;   // between panels
constexpr double k_bottom   = 56;

const char * const k_colors[] = {"#1f4e9c", "#d1495b", "#2e8b57", "#edae49", "#7b4f9d", "#00798c", "#8c564b", "#e377c2",
                                 "#555555", "#a0a000"};
constexpr size_t k_n_colors = sizeof(k_colors) / sizeof(k_colors[0]);

// The project's corpus domains (tools/build_corpus.py), in palette order: each
// has a colour no other name takes first.
const char * const k_known_domains[] = {"en", "code", "ja", "zh", "de", "fr"};

size_t palette_index(const std::string & name) {
    for (size_t i = 0; i < sizeof(k_known_domains) / sizeof(k_known_domains[0]); ++i) {
        if (name == k_known_domains[i]) return i;
    }
    uint32_t h = 2166136261u;   // FNV-1a: the same name, the same colour, in every run and figure
    for (unsigned char ch : name) h = (h ^ ch) * 16777619u;
    return h % k_n_colors;
}

bool is_known_domain(const std::string & name) {
    for (const char * d : k_known_domains) {
        if (name == d) return true;
    }
    return false;
}

// The colour of every series of a panel: grey for the right axis, black for the
// bold one, else series_colour(name). The project's domains take theirs first;
// another name whose colour a series of the panel already took gets the next
// free one, so lines stay apart.
std::vector<const char *> panel_colors(const chart_panel & p) {
    std::vector<const char *> out(p.series.size(), nullptr);
    std::vector<bool> taken(k_n_colors, false);
    for (int pass = 0; pass < 2; ++pass) {
        for (size_t si = 0; si < p.series.size(); ++si) {
            const chart_series & s = p.series[si];
            if (s.right_axis || s.bold) {
                out[si] = s.right_axis ? "#888888" : "#111111";
                continue;
            }
            if (is_known_domain(s.name) != (pass == 0)) continue;
            size_t i = palette_index(s.name);
            for (size_t step = 0; step < k_n_colors && taken[i]; ++step) i = (i + 1) % k_n_colors;
            taken[i] = true;
            out[si] = k_colors[i];
        }
    }
    return out;
}

// text from inputs (series names, labels) is data: no markup, no control characters
std::string esc(const std::string & s) { return xml_text(s); }

std::string num(double v) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%.1f", v);
    return buf;
}

// A data value as written in data-* attributes: round-trips exactly.
std::string exact(double v) {
    char buf[40];
    snprintf(buf, sizeof(buf), "%.17g", v);
    return buf;
}

// Tick label: as few digits as the step needs.
std::string tick_text(double v, double step) {
    char buf[32];
    if (std::fabs(v) < step * 1e-9) v = 0;
    // as many decimals as the step has: 2 -> 0, 2.5 -> 1, 0.2 -> 1, 0.25 -> 2
    int decimals = 0;
    while (decimals < 6) {
        const double scaled = step * std::pow(10, decimals);
        if (std::fabs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) break;
        ++decimals;
    }
    if (std::fabs(v) >= 1e6 || (v != 0 && std::fabs(v) < 1e-4)) snprintf(buf, sizeof(buf), "%.2g", v);
    else snprintf(buf, sizeof(buf), "%.*f", decimals, v);
    return buf;
}

struct axis {
    double lo = 0, hi = 1, step = 0.2;
    bool   any = false;
};

// A range with 4-6 "nice" ticks covering every finite value.
axis nice_axis(double lo, double hi) {
    axis a;
    if (!(lo <= hi)) return a;
    a.any = true;
    if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
        const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
        lo -= pad;
        hi += pad;
    }
    const double raw  = (hi - lo) / 5;
    const double mag  = std::pow(10, std::floor(std::log10(raw)));
    const double frac = raw / mag;
    a.step = (frac <= 1 ? 1 : frac <= 2 ? 2 : frac <= 2.5 ? 2.5 : frac <= 5 ? 5 : 10) * mag;
    a.lo   = std::floor(lo / a.step) * a.step;
    a.hi   = std::ceil(hi / a.step) * a.step;
    return a;
}

void extent(const std::vector<double> & v, double & lo, double & hi) {
    for (double x : v) {
        if (std::isfinite(x)) {
            lo = std::min(lo, x);
            hi = std::max(hi, x);
        }
    }
}

// The opening of every figure: the <svg> element, a white page and the title.
std::string svg_open(double height, const std::string & title) {
    std::string o;
    o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(k_width) + "\" height=\"" + num(height) +
         "\" viewBox=\"0 0 " + num(k_width) + " " + num(height) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
    o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    o += "<text x=\"" + num(k_width / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" +
         esc(title) + "</text>\n";
    return o;
}

} // namespace

double chart_height(const chart & c) {
    const double n_panels = (double) std::max<size_t>(1, c.panels.size());
    return k_top + n_panels * k_panel_h + (n_panels - 1) * k_gap + k_bottom;
}

const char * series_colour(const std::string & name) {
    return k_colors[palette_index(name)];
}

chart_series size_series(const std::vector<double> & xs, const std::vector<uint64_t> & bytes, chart_panel & panel) {
    const uint64_t largest = bytes.empty() ? 0 : *std::max_element(bytes.begin(), bytes.end());
    const size_unit unit = decimal_unit(largest);
    panel.y2_label = std::string("file size (") + unit.name + ")";
    chart_series size{"file size", xs, {}};
    size.right_axis = size.dashed = true;
    for (uint64_t b : bytes) size.y.push_back((double) b / unit.bytes);
    return size;
}

std::string render_svg(const chart & c) {
    const double height   = chart_height(c);
    const double plot_w   = k_width - k_left - k_right;

    double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo;
    for (const auto & p : c.panels)
        for (const auto & s : p.series) extent(s.x, xlo, xhi);
    for (const auto & m : c.marks) extent({m.x}, xlo, xhi);
    axis xa = nice_axis(xlo, xhi);
    if (c.x_integer && xa.any && xa.step < 1) {
        // whole-number x (layers, counts): no ticks between them
        xa.step = 1;
        xa.lo = std::floor(xa.lo);
        xa.hi = std::ceil(xa.hi);
    }
    auto px = [&](double x) {
        const double t = (x - xa.lo) / (xa.hi - xa.lo);
        return k_left + (c.x_descending ? 1 - t : t) * plot_w;
    };

    std::string o = svg_open(height, c.title);

    if (!c.panels.empty()) {
        double lx = k_left;
        const std::vector<const char *> colors = panel_colors(c.panels[0]);
        for (size_t si = 0; si < c.panels[0].series.size(); ++si) {
            const chart_series & s = c.panels[0].series[si];
            const std::string dash = s.dashed ? " stroke-dasharray=\"6 4\"" : "";
            o += "<line x1=\"" + num(lx) + "\" y1=\"44\" x2=\"" + num(lx + 22) + "\" y2=\"44\" stroke=\"" +
                 colors[si] + "\" stroke-width=\"" + (s.bold ? "2.6" : "1.3") + "\"" + dash + "/>\n";
            o += "<text x=\"" + num(lx + 27) + "\" y=\"48\">" + esc(s.name) + "</text>\n";
            lx += 40 + 7.0 * (double) s.name.size();
        }
    }
    for (size_t pi = 0; pi < c.panels.size(); ++pi) {
        const chart_panel & p = c.panels[pi];
        const double top = k_top + (double) pi * (k_panel_h + k_gap), bottom = top + k_panel_h;
        double l_lo = std::numeric_limits<double>::infinity(), l_hi = -l_lo, r_lo = l_lo, r_hi = -l_lo;
        for (const auto & s : p.series) {
            if (s.right_axis) extent(s.y, r_lo, r_hi);
            else extent(s.y, l_lo, l_hi);
        }
        const axis la = nice_axis(l_lo, l_hi), ra = nice_axis(r_lo, r_hi);
        auto py = [&](const axis & a, double y) { return bottom - (y - a.lo) / (a.hi - a.lo) * k_panel_h; };

        o += "<rect x=\"" + num(k_left) + "\" y=\"" + num(top) + "\" width=\"" + num(plot_w) + "\" height=\"" +
             num(k_panel_h) + "\" fill=\"none\" stroke=\"#444\"/>\n";
        // grid and ticks: left axis (with grid lines), right axis, shared x axis
        if (la.any) {
            for (double v = la.lo; v <= la.hi + la.step * 1e-6; v += la.step) {
                const double y = py(la, v);
                o += "<line x1=\"" + num(k_left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(k_left + plot_w) + "\" y2=\"" +
                     num(y) + "\" stroke=\"#e4e4e4\"/>\n";
                o += "<text x=\"" + num(k_left - 6) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">" +
                     tick_text(v, la.step) + "</text>\n";
            }
        }
        if (ra.any) {
            for (double v = ra.lo; v <= ra.hi + ra.step * 1e-6; v += ra.step) {
                o += "<text x=\"" + num(k_left + plot_w + 6) + "\" y=\"" + num(py(ra, v) + 4) + "\" fill=\"#666\">" +
                     tick_text(v, ra.step) + "</text>\n";
            }
        }
        if (xa.any) {
            for (double v = xa.lo; v <= xa.hi + xa.step * 1e-6; v += xa.step) {
                o += "<line x1=\"" + num(px(v)) + "\" y1=\"" + num(bottom) + "\" x2=\"" + num(px(v)) + "\" y2=\"" +
                     num(bottom + 5) + "\" stroke=\"#444\"/>\n";
                o += "<text x=\"" + num(px(v)) + "\" y=\"" + num(bottom + 18) + "\" text-anchor=\"middle\">" +
                     tick_text(v, xa.step) + "</text>\n";
            }
        }
        o += "<text transform=\"translate(" + num(18) + "," + num((top + bottom) / 2) +
             ") rotate(-90)\" text-anchor=\"middle\">" + esc(p.y_label) + "</text>\n";
        if (!p.y2_label.empty()) {
            o += "<text transform=\"translate(" + num(k_width - 14) + "," + num((top + bottom) / 2) +
                 ") rotate(90)\" text-anchor=\"middle\" fill=\"#666\">" + esc(p.y2_label) + "</text>\n";
        }

        // the series
        const std::vector<const char *> colors = panel_colors(p);
        for (size_t si = 0; si < p.series.size(); ++si) {
            const chart_series & s = p.series[si];
            const axis &  a     = s.right_axis ? ra : la;
            const char *  color = colors[si];
            const std::string width = s.bold ? "2.6" : "1.3";
            const std::string dash  = s.dashed ? " stroke-dasharray=\"6 4\"" : "";
            std::string pts, marks;
            for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
                if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
                const std::string X = num(px(s.x[i])), Y = num(py(a, s.y[i]));
                pts += X + "," + Y + " ";
                marks += "<circle cx=\"" + X + "\" cy=\"" + Y + "\" r=\"" + (s.bold ? "3.6" : "2.4") + "\" fill=\"" +
                         color + "\" data-series=\"" + esc(s.name) + "\" data-x=\"" + exact(s.x[i]) + "\" data-y=\"" +
                         exact(s.y[i]) + "\"/>\n";
            }
            o += "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"" + width + "\"" + dash +
                 " points=\"" + pts + "\"/>\n" + marks;
        }
        for (const chart_mark & m : c.marks) {
            if (!xa.any || !std::isfinite(m.x)) continue;
            const std::string X = num(px(m.x));
            o += "<line x1=\"" + X + "\" y1=\"" + num(top) + "\" x2=\"" + X + "\" y2=\"" + num(bottom) +
                 "\" stroke=\"#b8860b\" stroke-width=\"1.6\" stroke-dasharray=\"3 3\" data-mark=\"" + exact(m.x) + "\"/>\n";
            if (pi == 0) {
                o += "<text x=\"" + num(px(m.x) + 4) + "\" y=\"" + num(top + 14) + "\" fill=\"#8b6508\">" + esc(m.label) +
                     "</text>\n";
            }
        }
    }
    o += "<text x=\"" + num(k_left + plot_w / 2) + "\" y=\"" + num(height - 14) + "\" text-anchor=\"middle\">" +
         esc(c.x_label) + "</text>\n";
    o += "</svg>\n";
    return o;
}

// ---- heatmaps ----------------------------------------------------------------------------

namespace {

constexpr double k_hm_left   = 78;
constexpr double k_hm_right  = 24;
constexpr double k_hm_top    = 70;
constexpr double k_hm_bottom = 64;

double row_height(const heatmap & h) {
    const double rows = (double) std::max<size_t>(1, h.row_labels.size());
    return std::clamp(420.0 / rows, 4.0, 28.0);
}

// Colour of a value in [0, 1] on one of the two ramps (white to the ramp's colour).
std::string ramp(double t, bool marked) {
    t = std::clamp(t, 0.0, 1.0);
    if (marked) t = 0.25 + 0.75 * t;   // a kept cell is blue however small its value
    const double hi[2][3] = {{150, 150, 150}, {20, 60, 160}};   // unmarked: grey; marked: blue
    const double lo[2][3] = {{245, 245, 245}, {215, 228, 250}};
    const int    k = marked ? 1 : 0;
    char buf[16];
    snprintf(buf, sizeof(buf), "#%02x%02x%02x", (int) std::lround(lo[k][0] + (hi[k][0] - lo[k][0]) * t),
             (int) std::lround(lo[k][1] + (hi[k][1] - lo[k][1]) * t), (int) std::lround(lo[k][2] + (hi[k][2] - lo[k][2]) * t));
    return buf;
}

} // namespace

double heatmap_height(const heatmap & h) {
    return k_hm_top + row_height(h) * (double) std::max<size_t>(1, h.row_labels.size()) + k_hm_bottom;
}

std::string render_heatmap_svg(const heatmap & h) {
    const size_t rows = h.row_labels.size(), cols = h.n_cols;
    const double height = heatmap_height(h), rh = row_height(h);
    const double plot_w = k_width - k_hm_left - k_hm_right;
    const double cw = cols ? plot_w / (double) cols : plot_w;
    double vmax = 0;
    for (double v : h.values) {
        if (std::isfinite(v)) vmax = std::max(vmax, v);
    }
    auto level = [&](double v) {
        // 32 colour levels: adjacent cells of one level merge into one rectangle
        const double t = vmax > 0 && std::isfinite(v) && v > 0 ? std::sqrt(v / vmax) : 0.0;
        return (int) std::lround(t * 31);
    };

    std::string o = svg_open(height, h.title);
    // legend: the two ramps
    double lx = k_hm_left;
    for (int k = 1; k >= 0; --k) {
        const std::string & label = k ? h.marked_label : h.unmarked_label;
        if (label.empty()) continue;
        for (int i = 0; i < 8; ++i) {
            o += "<rect x=\"" + num(lx + i * 8) + "\" y=\"38\" width=\"8\" height=\"10\" fill=\"" + ramp(i / 7.0, k) + "\"/>\n";
        }
        o += "<text x=\"" + num(lx + 70) + "\" y=\"48\">" + esc(label) + "</text>\n";
        lx += 90 + 7.0 * (double) label.size();
    }
    if (!h.value_label.empty()) o += "<text x=\"" + num(lx) + "\" y=\"48\" fill=\"#555\">" + esc(h.value_label) + "</text>\n";

    for (size_t r = 0; r < rows; ++r) {
        const double y = k_hm_top + (double) r * rh;
        std::string vals, marks;
        for (size_t c = 0; c < cols; ++c) {
            const size_t i = r * cols + c;
            const double v = i < h.values.size() ? h.values[i] : NAN;
            const bool   m = i < h.marked.size() && h.marked[i];
            vals += (c ? " " : "") + exact(v);
            marks += (c ? " " : "") + std::string(m ? "1" : "0");
        }
        o += "<g data-row=\"" + esc(h.row_labels[r]) + "\" data-values=\"" + vals + "\" data-marked=\"" + marks + "\">\n";
        for (size_t c = 0; c < cols;) {
            const size_t i  = r * cols + c;
            const int    lv = level(i < h.values.size() ? h.values[i] : NAN);
            const bool   m  = i < h.marked.size() && h.marked[i];
            size_t run = 1;
            while (c + run < cols) {
                const size_t j = i + run;
                if (level(j < h.values.size() ? h.values[j] : NAN) != lv || (j < h.marked.size() && h.marked[j]) != m) break;
                ++run;
            }
            o += "<rect x=\"" + num(k_hm_left + (double) c * cw) + "\" y=\"" + num(y) + "\" width=\"" +
                 num(std::max(0.1, (double) run * cw)) + "\" height=\"" + num(rh) + "\" fill=\"" + ramp(lv / 31.0, m) +
                 "\" data-cols=\"" + std::to_string(c) + " " + std::to_string(run) + "\" data-marked=\"" + (m ? "1" : "0") +
                 "\"/>\n";
            c += run;
        }
        o += "</g>\n";
        // row labels: every row when they fit, else every k-th
        const size_t every = (size_t) std::ceil(12.0 / rh);
        if (r % every == 0) {
            o += "<text x=\"" + num(k_hm_left - 6) + "\" y=\"" + num(y + rh / 2 + 4) + "\" text-anchor=\"end\">" +
                 esc(h.row_labels[r]) + "</text>\n";
        }
    }
    const double bottom = k_hm_top + (double) rows * rh;
    o += "<rect x=\"" + num(k_hm_left) + "\" y=\"" + num(k_hm_top) + "\" width=\"" + num(plot_w) + "\" height=\"" +
         num(bottom - k_hm_top) + "\" fill=\"none\" stroke=\"#444\"/>\n";
    // column ticks: a nice step over the column count
    if (cols > 0) {
        const axis xa = nice_axis(0, (double) cols);
        for (double v = 0; v <= (double) cols + 1e-9; v += xa.step) {
            const double x = k_hm_left + v * cw;
            o += "<line x1=\"" + num(x) + "\" y1=\"" + num(bottom) + "\" x2=\"" + num(x) + "\" y2=\"" + num(bottom + 5) +
                 "\" stroke=\"#444\"/>\n";
            o += "<text x=\"" + num(x) + "\" y=\"" + num(bottom + 18) + "\" text-anchor=\"middle\">" + tick_text(v, xa.step) +
                 "</text>\n";
        }
    }
    o += "<text x=\"" + num(k_hm_left + plot_w / 2) + "\" y=\"" + num(height - 16) + "\" text-anchor=\"middle\">" +
         esc(h.x_label) + "</text>\n";
    o += "<text transform=\"translate(" + num(16) + "," + num((k_hm_top + bottom) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + esc(h.y_label) + "</text>\n";
    o += "</svg>\n";
    return o;
}

} // namespace reap::util
