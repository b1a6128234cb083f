// Tests of the plan format (src/plan/plan.h): parsing hostile documents
// (every field type-checked, messages naming field and layer), writing and
// reading back, and validation against models of the zoo (layers, ranges,
// counts, group-limited routers).
#include "prune_test_util.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

using nlohmann::json;

namespace {

json good_doc() {
    return json::parse(R"({
        "format": "reap-plan", "version": 1,
        "model": {"arch": "qwen3moe", "n_layer": 3, "n_expert": 8, "n_expert_used": 2},
        "n_keep": 4,
        "layers": [{"layer": 0, "keep": [3, 1, 0, 7]}, {"layer": 2, "keep": [0, 1, 2, 3]}],
        "provenance": {"method": "test"}
    })");
}

// Parses `doc` and expects failure with a message containing `needle`.
void expect_reject(const json & doc, const std::string & needle) {
    reap::plan p;
    std::string err;
    EXPECT_FALSE(reap::parse_plan(doc.dump(), "t.json", p, err)) << doc.dump();
    EXPECT_NE(err.find(needle), std::string::npos) << "message: " << err << "\nexpected to contain: " << needle;
}

} // namespace

TEST(PlanFormat, ParsesAGoodPlan) {
    reap::plan p;
    std::string err;
    ASSERT_TRUE(reap::parse_plan(good_doc().dump(), "t.json", p, err)) << err;
    EXPECT_EQ(p.arch, "qwen3moe");
    EXPECT_EQ(p.n_layer, 3);
    EXPECT_EQ(p.n_expert, 8);
    EXPECT_EQ(p.n_expert_used, 2);
    EXPECT_EQ(p.n_keep, 4);
    ASSERT_EQ(p.layers.size(), 2u);
    EXPECT_EQ(p.layers[0].keep, (std::vector<int64_t>{3, 1, 0, 7}));
    ASSERT_NE(p.find_layer(2), nullptr);
    EXPECT_EQ(p.find_layer(1), nullptr);
    EXPECT_EQ(p.provenance["method"], "test");
}

TEST(PlanFormat, RejectsHostileDocuments) {
    expect_reject(json::array(), "top level must be an object");
    {
        reap::plan p;
        std::string err;
        EXPECT_FALSE(reap::parse_plan("{\"format\": ", "t.json", p, err));
        EXPECT_NE(err.find("not valid JSON"), std::string::npos) << err;
        EXPECT_NE(err.find("t.json"), std::string::npos) << err;
    }
    auto with = [](auto f) {
        json d = good_doc();
        f(d);
        return d;
    };
    expect_reject(with([](json & d) { d.erase("format"); }), "missing field \"format\"");
    expect_reject(with([](json & d) { d["format"] = "reap-plan2"; }), "\"format\" must be");
    expect_reject(with([](json & d) { d["version"] = 2; }), "unsupported version 2");
    expect_reject(with([](json & d) { d["version"] = "1"; }), "must be an integer, not string");
    expect_reject(with([](json & d) { d.erase("model"); }), "missing field \"model\"");
    expect_reject(with([](json & d) { d["model"] = 5; }), "\"model\" must be an object");
    expect_reject(with([](json & d) { d["model"]["arch"] = 3; }), "model.arch must be a non-empty string");
    expect_reject(with([](json & d) { d["model"]["arch"] = ""; }), "model.arch must be a non-empty string");
    expect_reject(with([](json & d) { d["model"]["n_expert"] = 8.0; }), "n_expert must be an integer, not number");
    expect_reject(with([](json & d) { d["model"]["n_expert"] = -8; }), "n_expert = -8 out of range");
    expect_reject(with([](json & d) { d["model"]["n_layer"] = 0; }), "n_layer = 0 out of range");
    expect_reject(with([](json & d) { d["model"]["n_expert"] = 18446744073709551615ull; }), "out of range");
    expect_reject(with([](json & d) { d["model"]["n_expert_used"] = 9; }), "n_expert_used = 9 out of range");
    expect_reject(with([](json & d) { d["n_keep"] = true; }), "must be an integer, not boolean");
    expect_reject(with([](json & d) { d["n_keep"] = 9; }), "\"n_keep\" = 9 out of range");
    expect_reject(with([](json & d) { d["n_keep"] = 0; }), "\"n_keep\" = 0 out of range");
    expect_reject(with([](json & d) { d["layers"] = json::object(); }), "\"layers\" must be an array");
    expect_reject(with([](json & d) { d["layers"] = json::array(); }), "\"layers\" is empty");
    expect_reject(with([](json & d) { d["layers"][0] = 3; }), "layers[0] must be an object");
    expect_reject(with([](json & d) { d["layers"][0].erase("layer"); }), "layers[0]: missing field \"layer\"");
    expect_reject(with([](json & d) { d["layers"][0]["layer"] = 3; }), "layers[0].layer = 3 out of range [0, 2]");
    expect_reject(with([](json & d) { d["layers"][1]["layer"] = 0; }), "layer 0 is listed twice");
    expect_reject(with([](json & d) { std::swap(d["layers"][0], d["layers"][1]); }), "ascending order");
    expect_reject(with([](json & d) { d["layers"][1].erase("keep"); }), "layer 2: missing field \"keep\"");
    expect_reject(with([](json & d) { d["layers"][1]["keep"] = "0,1,2,3"; }), "layer 2: \"keep\" must be an array");
    expect_reject(with([](json & d) { d["layers"][1]["keep"] = {0, 1, 2}; }), "layer 2: keeps 3 experts, n_keep is 4");
    expect_reject(with([](json & d) { d["layers"][1]["keep"] = {0, 1, 2, 8}; }), "layer 2: expert 8 (keep[3]) out of range [0, 8)");
    expect_reject(with([](json & d) { d["layers"][1]["keep"] = {0, 1, -1, 3}; }), "layer 2: expert -1");
    expect_reject(with([](json & d) { d["layers"][1]["keep"] = {0, 1, 1, 3}; }), "layer 2: expert 1 listed twice");
    expect_reject(with([](json & d) { d["layers"][1]["keep"] = {0, 1, 2.5, 3}; }), "layer 2: keep[2] must be an integer");
    expect_reject(with([](json & d) { d["layers"][1]["keep"] = {0, 1, nullptr, 3}; }), "not null");
    expect_reject(with([](json & d) { d["provenance"] = "x"; }), "\"provenance\" must be an object");
}

TEST(PlanFormat, WriteReadRoundTripAndSha) {
    const std::string dir = prune_test::scratch("plan-format-roundtrip");
    reap::plan p;
    std::string err;
    ASSERT_TRUE(reap::parse_plan(good_doc().dump(), "t.json", p, err)) << err;
    const std::string path = dir + "/p.json";
    ASSERT_TRUE(reap::write_plan(p, path, false, err)) << err;
    EXPECT_FALSE(reap::write_plan(p, path, false, err));
    EXPECT_NE(err.find("exists"), std::string::npos) << err;
    ASSERT_TRUE(reap::write_plan(p, path, true, err)) << err;
    reap::plan q;
    ASSERT_TRUE(reap::read_plan(path, q, err)) << err;
    EXPECT_EQ(reap::plan_to_json(p), reap::plan_to_json(q));
    // the file is plain JSON with the documented fields
    const json doc = json::parse(prune_test::read_all(path));
    EXPECT_EQ(doc["format"], "reap-plan");
    EXPECT_EQ(doc["layers"][0]["keep"], json({3, 1, 0, 7}));
    std::string hex, hex2;
    ASSERT_TRUE(reap::plan_file_sha256(path, hex, err)) << err;
    EXPECT_EQ(hex.size(), 64u);
    ASSERT_TRUE(reap::write_plan(q, path, true, err)) << err;
    ASSERT_TRUE(reap::plan_file_sha256(path, hex2, err)) << err;
    EXPECT_EQ(hex, hex2) << "writing is deterministic";
    EXPECT_FALSE(reap::read_plan(dir + "/missing.json", q, err));
    EXPECT_NE(err.find("missing.json"), std::string::npos) << err;
}

namespace {

reap::plan_model_facts facts(int64_t n_expert, int64_t n_used, std::vector<int> layers, int64_t G = 0, int64_t G_used = 0) {
    reap::plan_model_facts f;
    f.arch = "qwen3moe";
    f.n_layer = 4;
    f.n_expert = n_expert;
    f.n_expert_used = n_used;
    f.n_group = G;
    f.n_group_used = G_used;
    f.moe_layers = std::move(layers);
    return f;
}

reap::plan make(int64_t n_expert, int64_t n_used, int64_t n_keep, std::vector<std::pair<int, std::vector<int64_t>>> layers) {
    reap::plan p;
    p.arch = "qwen3moe";
    p.n_layer = 4;
    p.n_expert = n_expert;
    p.n_expert_used = n_used;
    p.n_keep = n_keep;
    for (auto & l : layers) p.layers.push_back({l.first, l.second});
    return p;
}

void expect_invalid(const reap::plan & p, const reap::plan_model_facts & f, const std::string & needle) {
    std::string err;
    EXPECT_FALSE(reap::validate_plan(p, f, err));
    EXPECT_NE(err.find(needle), std::string::npos) << "message: " << err << "\nexpected: " << needle;
}

} // namespace

TEST(PlanValidate, Rules) {
    const auto f = facts(8, 2, {1, 3});
    std::string err;
    EXPECT_TRUE(reap::validate_plan(make(8, 2, 2, {{1, {7, 0}}, {3, {1, 2}}}), f, err)) << err;
    expect_invalid(make(8, 2, 2, {{1, {7, 0}}}), f, "MoE layer 3 is missing");
    expect_invalid(make(8, 2, 2, {{0, {1, 2}}, {1, {7, 0}}, {3, {1, 2}}}), f, "layer 0 is not an MoE layer of the model (MoE layers: 1, 3)");
    expect_invalid(make(8, 2, 1, {{1, {7}}, {3, {1}}}), f, "n_keep 1 is below n_expert_used 2");
    expect_invalid(make(8, 2, 2, {{1, {7, 0}}, {3, {1, 8}}}), f, "layer 3: expert 8 (keep[1]) out of range [0, 8)");
    expect_invalid(make(8, 2, 2, {{1, {7, 7}}, {3, {1, 2}}}), f, "layer 1: expert 7 listed twice");
    expect_invalid(make(8, 2, 2, {{1, {7, 0, 1}}, {3, {1, 2}}}), f, "layer 1: keeps 3 experts, n_keep is 2");
    auto p = make(8, 2, 2, {{1, {7, 0}}, {3, {1, 2}}});
    p.arch = "qwen2moe";
    expect_invalid(p, f, "arch 'qwen2moe'");
    p = make(16, 2, 2, {{1, {7, 0}}, {3, {1, 2}}});
    expect_invalid(p, f, "n_expert 16, the model has 8");
    p = make(8, 4, 4, {{1, {7, 0, 1, 2}}, {3, {1, 2, 3, 4}}});
    expect_invalid(p, f, "n_expert_used 4, the model has 2");
}

TEST(PlanValidate, GroupLimitedRouters) {
    // 16 experts in 4 groups of 4, 2 groups used, 4 experts per token
    const auto f = facts(16, 4, {1}, 4, 2);
    std::string err;
    EXPECT_TRUE(reap::validate_plan(make(16, 4, 8, {{1, {1, 0, 5, 7, 11, 8, 14, 13}}}), f, err)) << err;
    expect_invalid(make(16, 4, 8, {{1, {1, 0, 2, 7, 11, 8, 14, 13}}}), f, "keeps 3 in group 0, 2 expected");
    expect_invalid(make(16, 4, 8, {{1, {5, 7, 1, 0, 11, 8, 14, 13}}}), f, "output expert 0 falls in output group 0 but is source expert 5 of group 1");
    expect_invalid(make(16, 4, 6, {{1, {1, 0, 5, 7, 11, 8}}}), f, "not a multiple of the group count");
    expect_invalid(make(16, 4, 4, {{1, {1, 5, 9, 13}}}), f, "keep at least 8");
}

// Validation against real files: every zoo model accepts its half plan and
// rejects a plan made for another model.
TEST(PlanValidate, ZooModels) {
    std::string err;
    const std::string zoo = prune_test::zoo_dir("prune-zoo", err);
    if (zoo.empty()) GTEST_SKIP() << err;
    for (const std::string & name : prune_test::zoo_names()) {
        SCOPED_TRACE(name);
        reap::gguf::model m;
        ASSERT_TRUE(reap::gguf::open_model(zoo + "/" + name + ".gguf", m, err)) << err;
        reap::plan p;
        ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 7, p, err)) << err;
        EXPECT_TRUE(reap::validate_plan(p, m, err)) << err;
        reap::plan q = p;
        q.layers.pop_back();
        EXPECT_FALSE(reap::validate_plan(q, m, err));
        EXPECT_NE(err.find("is missing from the plan"), std::string::npos) << err;
        q = p;
        q.n_layer += 1;
        EXPECT_FALSE(reap::validate_plan(q, m, err));
        EXPECT_NE(err.find("n_layer"), std::string::npos) << err;
    }
}

// Seeded random damage to a good document (byte flips, truncations, spliced
// bytes): parsing never crashes, and whatever it accepts is internally
// consistent (the checks of parse_plan hold on the result).
TEST(PlanFormat, RandomDamageNeverCrashes) {
    const std::string good = good_doc().dump();
    std::mt19937 rng(1234);
    int accepted = 0;
    for (int i = 0; i < 3000; ++i) {
        std::string s = good;
        const int n_edits = 1 + int(rng() % 4);
        for (int k = 0; k < n_edits && !s.empty(); ++k) {
            const size_t at = rng() % s.size();
            switch (rng() % 4) {
                case 0: s[at] = char(rng() & 0xff); break;
                case 1: s.resize(at); break;
                case 2: s.insert(at, 1, "0123456789-.,:[]{}\"e"[rng() % 20]); break;
                default: s.erase(at, 1 + rng() % 8); break;
            }
        }
        reap::plan p;
        std::string err;
        if (!reap::parse_plan(s, "fuzz.json", p, err)) {
            EXPECT_FALSE(err.empty());
            continue;
        }
        ++accepted;
        EXPECT_GE(p.n_keep, 1);
        EXPECT_LE(p.n_keep, p.n_expert);
        for (const auto & l : p.layers) {
            EXPECT_EQ(int64_t(l.keep.size()), p.n_keep);
            EXPECT_GE(l.layer, 0);
            EXPECT_LT(l.layer, p.n_layer);
            std::set<int64_t> ids(l.keep.begin(), l.keep.end());
            EXPECT_EQ(ids.size(), l.keep.size());
            for (int64_t e : l.keep) {
                EXPECT_GE(e, 0);
                EXPECT_LT(e, p.n_expert);
            }
        }
    }
    EXPECT_LT(accepted, 3000);
}
