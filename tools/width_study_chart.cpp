// tools/width_study_chart.cpp: the chart of the count-against-width study
// (scripts/width_study.sh, docs/results.md), drawn with reap's own chart code
// so that every domain has the colour it has in reap's other figures
// (util::series_colour). Reads the chart data tools/width_study.py writes:
//   {"domains": [...], "n_ff": N, "panels": [{"budget_percent": B, "x": [K/N ...],
//    "cuts": [...], "kld": {domain: [...]}, "kld_all": [...]}, ...]}
// and writes one panel per budget: mean KLD per domain (and all domains, bold)
// against the share of its channels each kept expert keeps (the budget's
// share = width only, 1 = count only).
//
// usage: width_study_chart CHART.json OUT.svg
#include "util/file.h"
#include "util/json_fields.h"
#include "util/publish.h"
#include "util/svg_chart.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

int main(int argc, char ** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CHART.json OUT.svg\n", argv[0]);
        return 2;
    }
    std::string text, err;
    if (!reap::util::read_file(argv[1], "chart data", text, err)) {
        fprintf(stderr, "width_study_chart: %s\n", err.c_str());
        return 2;
    }
    nlohmann::json j;
    if (!reap::util::parse_json_text(text, std::string("chart data '") + argv[1] + "'", j, err)) {
        fprintf(stderr, "width_study_chart: %s\n", err.c_str());
        return 2;
    }
    reap::util::chart c;
    try {   // a missing field or a value of another type: nlohmann's message
        c.title = "Count against width at equal bytes (reap-moe-tiny)";
        c.x_label = "share of its channels each kept expert keeps (count only = 1, width only = the budget)";
        for (const auto & p : j.at("panels")) {
            reap::util::chart_panel panel;
            panel.y_label = "KLD, " + std::to_string(p.at("budget_percent").get<int>()) + "% of the pool";
            const auto xs = p.at("x").get<std::vector<double>>();
            for (const auto & d : j.at("domains")) {
                const std::string name = d.get<std::string>();
                panel.series.push_back({name, xs, p.at("kld").at(name).get<std::vector<double>>()});
            }
            reap::util::chart_series all{"all domains", xs, p.at("kld_all").get<std::vector<double>>()};
            all.bold = true;
            panel.series.push_back(all);
            c.panels.push_back(panel);
        }
    } catch (const nlohmann::json::exception & e) {
        fprintf(stderr, "width_study_chart: %s: %s\n", argv[1], e.what());
        return 2;
    }
    if (!reap::util::write_file_durably(argv[2], reap::util::render_svg(c), err)) {
        fprintf(stderr, "width_study_chart: %s\n", err.c_str());
        return 2;
    }
    return 0;
}
