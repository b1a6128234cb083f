// Fuzzes the plan reader (parse_plan) and the check of a plan against a model
// (validate_plan) for a flat router and a group-limited one. A plan that
// parses must survive its own round trip: written back (plan_to_json) and
// parsed again, it has the same layers and keep lists.
#include "plan/plan.h"
#include "util/json.h"

#include <cstdio>
#include <cstdlib>
#include <string>

static reap::plan_model_facts facts(int64_t n_group, int64_t n_group_used) {
    reap::plan_model_facts f;
    f.arch          = "qwen3moe";
    f.n_layer       = 3;
    f.n_expert      = 16;
    f.n_expert_used = 4;
    f.n_group       = n_group;
    f.n_group_used  = n_group_used;
    f.moe_layers    = {0, 1, 2};
    return f;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string text((const char *) data, size);
    reap::plan p;
    std::string err;
    if (!reap::parse_plan(text, "fuzz.json", p, err)) {
        return 0;
    }
    (void) reap::validate_plan(p, facts(0, 0), err);
    (void) reap::validate_plan(p, facts(4, 2), err);

    reap::plan again;
    const std::string written = reap::util::json_text(reap::plan_to_json(p), 2);
    if (!reap::parse_plan(written, "round-trip.json", again, err)) {
        fprintf(stderr, "a plan that parsed does not parse after plan_to_json: %s\n", err.c_str());
        abort();
    }
    if (again.layers.size() != p.layers.size()) {
        fprintf(stderr, "round trip changed the number of layers\n");
        abort();
    }
    for (size_t i = 0; i < p.layers.size(); ++i) {
        if (again.layers[i].layer != p.layers[i].layer || again.layers[i].keep != p.layers[i].keep) {
            fprintf(stderr, "round trip changed layer %zu\n", i);
            abort();
        }
    }
    return 0;
}
