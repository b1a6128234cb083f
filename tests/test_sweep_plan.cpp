// Tests of the sweep's planning half (src/plan/sweep.h) and of the SVG chart
// it is drawn with (src/util/svg_chart.h), core only: size lists parse and
// reject what reap plan rejects; the points of a sweep are nested (checked
// here set by set), sorted, sized exactly as the file the prune path writes,
// each equals the plan `reap plan` would make for that size and carries its
// safety margin (computed here from the archive); two sizes
// that meet at one N are refused; the chart's polylines carry every finite
// point, largest N on the left when asked.
#include "gguf_test_util.h"
#include "plan/sweep.h"
#include "prune_test_util.h"
#include "saliency_test_util.h"
#include "report/sweep_chart.h"
#include "util/svg_chart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

namespace pl = reap::planner;
namespace s = reap::saliency;

namespace {

TEST(SweepPlan, ParseSizeLists) {
    std::vector<pl::size_request> r;
    std::string err;
    ASSERT_TRUE(pl::parse_size_requests(pl::size_kind::keep, "24,16,8", r, err)) << err;
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0].keep, 24);
    EXPECT_EQ(r[2].keep, 8);
    EXPECT_EQ(r[1].text, "16");
    ASSERT_TRUE(pl::parse_size_requests(pl::size_kind::ratio, "0.25,0.5", r, err)) << err;
    EXPECT_DOUBLE_EQ(r[1].ratio, 0.5);
    ASSERT_TRUE(pl::parse_size_requests(pl::size_kind::budget, "400G,1.5KiB", r, err)) << err;
    EXPECT_EQ(r[0].budget, 400000000000ull);
    EXPECT_EQ(r[1].budget, 1536ull);
    struct bad { pl::size_kind k; const char * list; const char * says; };
    for (const bad & b : {bad{pl::size_kind::keep, "", "empty item"}, bad{pl::size_kind::keep, "4,,2", "empty item"},
                          bad{pl::size_kind::keep, "4,4", "given twice"}, bad{pl::size_kind::keep, "-3", "not a positive"},
                          bad{pl::size_kind::keep, "0", "not a positive"}, bad{pl::size_kind::keep, "99999999999999999999", "not a positive"},
                          bad{pl::size_kind::ratio, "0.5,1", "[0, 1)"}, bad{pl::size_kind::ratio, "nan", "[0, 1)"},
                          bad{pl::size_kind::budget, "12Q", "--budgets"}}) {
        EXPECT_FALSE(pl::parse_size_requests(b.k, b.list, r, err)) << b.list;
        EXPECT_NE(err.find(b.says), std::string::npos) << b.list << ": " << err;
    }
}

TEST(SweepPlan, NestedSortedAndSizedAsWritten) {
    std::string err;
    const std::string zoo = prune_test::zoo_dir("sweep_zoo", err);
    ASSERT_FALSE(zoo.empty()) << err;
    const std::string dir = prune_test::scratch("sweep_plan");
    for (const std::string name : {"qwen3moe", "deepseek2"}) {
        const std::string model = zoo + "/" + name + ".gguf";
        reap::gguf::model m;
        ASSERT_TRUE(reap::gguf::open_model(model, m, err)) << err;
        s::fingerprint fp;
        ASSERT_TRUE(s::model_fingerprint(m, fp, err)) << err;
        const std::string sal = dir + "/" + name + ".saliency.gguf";
        ASSERT_TRUE(s::write_archive(saliency_test::make_archive({"code", "en"}, fp), sal, err, true)) << err;

        pl::ranked_model rm;
        ASSERT_TRUE(pl::open_ranked_model(model, sal, pl::rank_options{}, false, rm, err)) << err;
        const std::vector<int64_t> allowed = pl::allowed_keeps(rm.facts);
        ASSERT_GE(allowed.size(), 3u) << name;
        // three allowed sizes, asked for in scrambled order
        const std::string list = std::to_string(allowed[allowed.size() / 2]) + "," + std::to_string(allowed.front()) + "," +
                                 std::to_string(allowed.back());
        std::vector<pl::size_request> reqs;
        ASSERT_TRUE(pl::parse_size_requests(pl::size_kind::keep, list, reqs, err)) << err;
        pl::size_context sctx;
        sctx.model = &rm.model;
        sctx.layout = &rm.layout;
        sctx.prune.version = "test";
        sctx.prune.plan_sha256 = std::string(64, '0');
        std::vector<pl::sweep_point> pts;
        ASSERT_TRUE(pl::plan_sweep(rm, sctx, reqs, pts, err)) << err;
        ASSERT_EQ(pts.size(), 3u);
        EXPECT_EQ(pts[0].n_keep, allowed.back());
        EXPECT_EQ(pts[2].n_keep, allowed.front());
        for (size_t i = 0; i < pts.size(); ++i) {
            // the plan reap plan makes for this N
            reap::plan ref;
            ASSERT_TRUE(pl::make_plan(rm.rank, rm.facts, pts[i].n_keep, ref, err)) << err;
            ASSERT_EQ(ref.layers.size(), pts[i].p.layers.size());
            for (size_t l = 0; l < ref.layers.size(); ++l) EXPECT_EQ(ref.layers[l].keep, pts[i].p.layers[l].keep);
            // its safety margin: the best rank (reap score within one domain, ties to
            // the lower id) of a removed expert, computed here from the archive
            int64_t margin = 0;
            for (const auto & pl_layer : pts[i].p.layers) {
                const int l = pl_layer.layer;
                const int64_t E = rm.archive.model.n_expert;
                for (const auto & d : rm.archive.domains) {
                    auto sc = [&](int64_t e) {
                        const size_t c = rm.archive.index(l, (int) e);
                        return d.count[c] > 0 ? d.reap_sum[c] / d.count[c] : 0.0;
                    };
                    for (int64_t e = 0; e < E; ++e) {
                        if (std::count(pl_layer.keep.begin(), pl_layer.keep.end(), e)) continue;
                        int64_t rank = 1;
                        for (int64_t x = 0; x < E; ++x) rank += sc(x) > sc(e) || (sc(x) == sc(e) && x < e);
                        if (margin == 0 || rank < margin) margin = rank;
                    }
                }
            }
            EXPECT_EQ(pts[i].margin, margin) << name << " N = " << pts[i].n_keep;
            // nested, set by set, and no larger than the previous point
            if (i > 0) {
                EXPECT_LT(pts[i].n_keep, pts[i - 1].n_keep);
                EXPECT_LE(pts[i].bytes, pts[i - 1].bytes);
                for (size_t l = 0; l < pts[i].p.layers.size(); ++l) {
                    const auto & big = pts[i - 1].p.layers[l].keep;
                    const std::set<int64_t> bigset(big.begin(), big.end());
                    for (int64_t e : pts[i].p.layers[l].keep) {
                        EXPECT_TRUE(bigset.count(e)) << name << " layer " << pts[i].p.layers[l].layer << " expert " << e;
                    }
                }
            }
        }
        // the middle point's size: the file the prune path writes
        std::vector<std::string> written;
        ASSERT_TRUE(prune_test::prune_to(rm.model, pts[1].p, dir + "/mid.json", dir + "/" + name + "-mid.gguf", written, err))
            << err;
        uint64_t total = 0;
        for (const auto & w : written) total += prune_test::read_all(w).size();
        EXPECT_EQ(total, pts[1].bytes) << name;

        // the budget of the middle point and the keep count it comes to cannot both be asked for...
        std::vector<pl::size_request> b;
        ASSERT_TRUE(pl::parse_size_requests(pl::size_kind::budget, std::to_string(pts[1].bytes) + "," +
                                             std::to_string(pts[1].bytes + 1), b, err)) << err;
        EXPECT_FALSE(pl::plan_sweep(rm, sctx, b, pts, err));
        EXPECT_NE(err.find("both come to N = "), std::string::npos) << err;
        // ...and a keep count reap plan refuses is refused with its words
        ASSERT_TRUE(pl::parse_size_requests(pl::size_kind::keep, std::to_string(rm.facts.n_expert + 1), b, err));
        EXPECT_FALSE(pl::plan_sweep(rm, sctx, b, pts, err));
        EXPECT_NE(err.find("--keep "), std::string::npos) << err;
    }
}

TEST(SweepPlan, NotNestedIsNamed) {
    reap::plan a, b;
    a.n_keep = 2;
    b.n_keep = 3;
    a.layers = {{1, {0, 4}}};
    b.layers = {{1, {0, 1, 2}}};
    std::string why;
    EXPECT_FALSE(pl::plans_nested(a, b, why));
    EXPECT_NE(why.find("layer 1: expert 4 is kept at N = 2 but not at N = 3"), std::string::npos) << why;
    b.layers = {{1, {4, 1, 0}}};
    EXPECT_TRUE(pl::plans_nested(a, b, why)) << why;
}

// The x coordinates of every polyline, in document order.
std::vector<std::vector<double>> polyline_xs(const std::string & svg) {
    std::vector<std::vector<double>> out;
    const std::regex pl_re("points=\"([^\"]*)\"");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), pl_re); it != std::sregex_iterator(); ++it) {
        std::vector<double> xs;
        const std::string pts = (*it)[1];
        const std::regex pt_re("([-0-9.]+),([-0-9.]+)");
        for (auto p = std::sregex_iterator(pts.begin(), pts.end(), pt_re); p != std::sregex_iterator(); ++p) {
            xs.push_back(std::stod((*p)[1]));
        }
        out.push_back(xs);
    }
    return out;
}

TEST(SvgChart, EveryFinitePointDrawnLargestXLeftWhenDescending) {
    reap::util::chart c;
    c.title = "cost <of> each cut & more";
    c.x_label = "N";
    c.x_descending = true;
    reap::util::chart_panel p;
    p.y_label = "KLD";
    p.y2_label = "GB";
    p.series.push_back({"overall", {32, 24, 16, 8}, {0.0, 0.1, 0.5, 1.7}});
    p.series.push_back({"ja", {32, 24, 16, 8}, {0.0, NAN, 0.9, 2.0}});
    reap::util::chart_series size{"size", {32, 24, 16, 8}, {40, 31, 22, 13}};
    size.right_axis = true;
    p.series.push_back(size);
    c.panels = {p, p};
    const std::string svg = reap::util::render_svg(c);
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
    EXPECT_NE(svg.find("cost &lt;of&gt; each cut &amp; more"), std::string::npos);
    EXPECT_EQ(svg.find("<of>"), std::string::npos);
    const auto xs = polyline_xs(svg);
    ASSERT_EQ(xs.size(), 6u);  // three series in each of two panels
    EXPECT_EQ(xs[0].size(), 4u);
    EXPECT_EQ(xs[1].size(), 3u);  // the NaN is skipped
    EXPECT_EQ(xs[2].size(), 4u);
    for (const auto & line : xs) {
        for (size_t i = 1; i < line.size(); ++i) EXPECT_LT(line[i - 1], line[i]) << "descending x: larger N must be on the left";
    }
    c.x_descending = false;
    const auto asc = polyline_xs(reap::util::render_svg(c));
    EXPECT_GT(asc[0][0], asc[0][3]);
}

// The one sweep chart (report/sweep_chart.h): per domain, overall (bold) and the
// file size on the right axis in the unit of the largest size; a top-1 panel
// when asked; a missing measurement is a gap, not a zero.
TEST(SweepChart, PanelsSeriesAndUnits) {
    reap::report::sweep_chart_input in;
    in.title = "cut";
    in.domains = {"en", "ja"};
    for (int64_t n : {32, 16, 8}) {
        reap::report::sweep_chart_point p;
        p.n_keep = n;
        p.bytes = (uint64_t) n * 100000000000ull;   // 3.2 TB at the largest: the axis is in TB
        p.overall = {0.1 * (double) (32 - n), 1.0 - 0.01 * (double) (32 - n)};
        p.domains = {{0.2, 0.9}, n == 16 ? reap::report::sweep_chart_cost{} : reap::report::sweep_chart_cost{0.3, 0.8}};
        in.points.push_back(p);
    }
    reap::util::chart c = reap::report::sweep_chart(in);
    ASSERT_EQ(c.panels.size(), 2u);
    for (const reap::util::chart_panel & panel : c.panels) {
        ASSERT_EQ(panel.series.size(), 4u);   // en, ja, overall, file size
        EXPECT_EQ(panel.series[0].name, "en");
        EXPECT_EQ(panel.series[2].name, "overall");
        EXPECT_TRUE(panel.series[2].bold);
        EXPECT_FALSE(panel.series[0].bold);
        EXPECT_TRUE(std::isnan(panel.series[1].y[1])) << "ja was not measured at N = 16";
        EXPECT_TRUE(panel.series[3].right_axis);
        EXPECT_EQ(panel.y2_label, "file size (TB)");
        EXPECT_DOUBLE_EQ(panel.series[3].y[0], 3.2);
    }
    ASSERT_EQ(c.panels[0].series[2].y.size(), 3u);
    EXPECT_DOUBLE_EQ(c.panels[0].series[2].y[2], 2.4);   // KLD overall at N = 8
    EXPECT_DOUBLE_EQ(c.panels[1].series[2].y[1], 84.0);   // top-1 in %
    in.top1_panel = false;
    in.marks.push_back({16, "this build"});
    c = reap::report::sweep_chart(in);
    ASSERT_EQ(c.panels.size(), 1u);
    ASSERT_EQ(c.marks.size(), 1u);
    EXPECT_EQ(c.marks[0].x, 16);
}

// One colour per domain across every figure: "en" drawn first in one chart and
// third in another has the same colour in both; the project's domains differ;
// two names that hash to one colour in a panel are still told apart.
TEST(SvgChart, OneColourPerDomain) {
    auto fill_of = [](const std::string & svg, const std::string & series) {
        const size_t at = svg.find("data-series=\"" + series + "\"");
        if (at == std::string::npos) return std::string();
        const size_t f = svg.rfind("fill=\"", at);
        return svg.substr(f + 6, svg.find('"', f + 6) - f - 6);
    };
    auto chart_of = [](const std::vector<std::string> & names) {
        reap::util::chart c;
        reap::util::chart_panel p;
        for (const std::string & n : names) p.series.push_back({n, {1, 2}, {0.5, 1.0}});
        c.panels = {p};
        return reap::util::render_svg(c);
    };
    const std::string a = chart_of({"en", "ja", "code"}), b = chart_of({"zh", "code", "en", "fr"});
    EXPECT_EQ(fill_of(a, "en"), reap::util::series_colour("en"));
    EXPECT_EQ(fill_of(a, "en"), fill_of(b, "en"));
    EXPECT_EQ(fill_of(a, "code"), fill_of(b, "code"));
    std::set<std::string> known;
    for (const char * d : {"en", "code", "ja", "zh", "de", "fr"}) known.insert(reap::util::series_colour(d));
    EXPECT_EQ(known.size(), 6u);
    EXPECT_EQ(std::string(reap::util::series_colour("legal")), reap::util::series_colour("legal"));
    // a name sharing en's colour, in a panel with en: a different one
    std::string twin;
    for (int i = 0; i < 10000 && twin.empty(); ++i) {
        const std::string n = "d" + std::to_string(i);
        if (std::string(reap::util::series_colour(n)) == reap::util::series_colour("en")) twin = n;
    }
    ASSERT_FALSE(twin.empty());
    const std::string c = chart_of({twin, "en"});   // en keeps its colour even when drawn second
    EXPECT_NE(fill_of(c, "en"), fill_of(c, twin));
    EXPECT_EQ(fill_of(c, "en"), reap::util::series_colour("en"));
}

} // namespace
