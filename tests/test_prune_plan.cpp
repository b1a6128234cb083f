// Tests of the plan format (src/plan/plan.h): parsing hostile documents
// (every field type-checked, messages naming field and layer), writing and
// reading back, and validation against models of the zoo (layers, ranges,
// counts, group-limited routers).
#include "prune_test_util.h"

#include "moe/width.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
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
        // a number past a double's range is nlohmann's out_of_range, not a
        // parse_error (found by fuzz_plan: it used to escape as an exception)
        EXPECT_FALSE(reap::parse_plan("{\"share\": 0.6e2222222222}", "t.json", p, err));
        EXPECT_NE(err.find("not valid JSON"), std::string::npos) << err;
        // ... and the message says where, as it does for a parse error
        EXPECT_FALSE(reap::parse_plan("{\n  \"format\": \"reap-plan\",\n  \"n_keep\": 1e99999\n}\n", "t.json", p, err));
        EXPECT_NE(err.find("plan t.json: not valid JSON at line 3, column "), std::string::npos) << err;
        EXPECT_NE(err.find("number overflow parsing '1e99999'"), std::string::npos) << err;
        EXPECT_FALSE(reap::parse_plan("{\n  \"format\": \"reap-plan\",\n  \"n_keep\": [1 2]\n}\n", "t.json", p, err));
        EXPECT_NE(err.find("plan t.json: not valid JSON at line 3, column 16: "), std::string::npos) << err;
    }
    auto with = [](auto f) {
        json d = good_doc();
        f(d);
        return d;
    };
    expect_reject(with([](json & d) { d.erase("format"); }), "missing field \"format\"");
    expect_reject(with([](json & d) { d["format"] = "reap-plan2"; }), "\"format\" must be");
    expect_reject(with([](json & d) { d["version"] = 4; }), "unsupported version 4");
    expect_reject(with([](json & d) { d["version"] = 0; }), "unsupported version 0");
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

namespace {

// A width plan: good_doc() cut to 4 of 8 channels per expert.
json good_width_doc() {
    json d = good_doc();
    d["version"] = 2;
    d["width"] = {{"n_ff", 8}, {"keep", 4}};
    d["layers"][0]["channels"] = json::parse("[[0,1,2,3],[4,5,6,7],[0,2,4,6],[1,3,5,7]]");
    d["layers"][1]["channels"] = json::parse("[[0,1,2,7],[1,2,3,4],[2,3,6,7],[0,5,6,7]]");
    return d;
}

} // namespace

TEST(PlanFormat, WidthPlans) {
    reap::plan p;
    std::string err;
    ASSERT_TRUE(reap::parse_plan(good_width_doc().dump(), "t.json", p, err)) << err;
    ASSERT_TRUE(p.has_width());
    EXPECT_EQ(p.width_n_ff, 8);
    EXPECT_EQ(p.width_keep, 4);
    ASSERT_EQ(p.layers[0].channels.size(), 4u);
    EXPECT_EQ(p.layers[0].channels[2], (std::vector<int64_t>{0, 2, 4, 6}));
    EXPECT_EQ(p.layers[1].channels[3], (std::vector<int64_t>{0, 5, 6, 7}));

    // a version 2 plan is read and written as version 3 (channel bitmaps, hex:
    // channels 1..4 of 8 are bits 1..4 of one byte, 0x1e); a plan without a
    // width stays version 1, which older readers take
    const json doc = json::parse(reap::plan_text(p));
    EXPECT_EQ(doc, reap::plan_to_json(p)) << "plan_text and plan_to_json say the same";
    EXPECT_EQ(doc["version"], 3);
    EXPECT_EQ(doc["width"], json({{"n_ff", 8}, {"keep", 4}}));
    EXPECT_EQ(doc["layers"][1]["channel_bitmaps"], json({"87", "1e", "cc", "e1"}));
    EXPECT_FALSE(doc["layers"][1].contains("channels"));
    reap::plan q;
    ASSERT_TRUE(reap::parse_plan(reap::plan_text(p), "t.json", q, err)) << err;
    EXPECT_EQ(reap::plan_to_json(p), reap::plan_to_json(q));
    ASSERT_TRUE(reap::parse_plan(good_doc().dump(), "t.json", q, err)) << err;
    EXPECT_FALSE(q.has_width());
    const json plain = json::parse(reap::plan_text(q));
    EXPECT_EQ(plain["version"], 1);
    EXPECT_FALSE(plain.contains("width"));
    EXPECT_FALSE(plain["layers"][0].contains("channels"));
    // version 2 without a width is an expert-only plan
    json v2 = good_doc();
    v2["version"] = 2;
    ASSERT_TRUE(reap::parse_plan(v2.dump(), "t.json", q, err)) << err;
    EXPECT_FALSE(q.has_width());

    auto with = [](auto f) {
        json d = good_width_doc();
        f(d);
        return d;
    };
    expect_reject(with([](json & d) { d["version"] = 1; }), "\"width\" in a version 1 plan");
    expect_reject(with([](json & d) { d["version"] = 3; }), "layer 0: \"channels\" in a version 3 plan (version 3 gives the kept "
                                                            "channels as \"channel_bitmaps\")");
    expect_reject(with([](json & d) { d["layers"][0]["channel_bitmaps"] = {"0f", "f0", "55", "aa"}; }),
                  "layer 0: \"channel_bitmaps\" in a version 2 plan");
    expect_reject(with([](json & d) { d["width"] = 4; }), "\"width\" must be an object");
    expect_reject(with([](json & d) { d["width"].erase("keep"); }), "width: missing field \"keep\"");
    expect_reject(with([](json & d) { d["width"]["keep"] = 9; }), "width.keep = 9 out of range [1, 8]");
    expect_reject(with([](json & d) { d["width"]["keep"] = 0; }), "width.keep = 0 out of range");
    expect_reject(with([](json & d) { d["width"]["n_ff"] = "8"; }), "width.n_ff must be an integer");
    expect_reject(with([](json & d) { d["layers"][1].erase("channels"); }), "layer 2: missing field \"channels\"");
    expect_reject(with([](json & d) { d["layers"][1]["channels"] = 3; }), "layer 2: \"channels\" must be an array");
    expect_reject(with([](json & d) { d["layers"][0]["channels"].erase(3); }), "layer 0: \"channels\" has 3 lists, n_keep is 4");
    expect_reject(with([](json & d) { d["layers"][0]["channels"][1] = {4, 5, 6}; }),
                  "layer 0: channels[1] (source expert 1) lists 3 channels, width.keep is 4");
    expect_reject(with([](json & d) { d["layers"][0]["channels"][1] = {4, 5, 7, 6}; }),
                  "channel 6 after 7 (channels must be in ascending order)");
    expect_reject(with([](json & d) { d["layers"][0]["channels"][1] = {4, 5, 5, 6}; }), "channel 5 after 5 (listed twice)");
    expect_reject(with([](json & d) { d["layers"][0]["channels"][1] = {4, 5, 6, 8}; }), "channels[1] (source expert 1)[3] = 8 out of range [0, 7]");
    expect_reject(with([](json & d) { d["layers"][0]["channels"][1] = {4, 5, 6, -1}; }), "out of range [0, 7]");
    expect_reject(with([](json & d) { d["layers"][0]["channels"][0] = "0,1,2,3"; }), "channels[0] (source expert 3) must be an array");
    expect_reject(with([](json & d) { d.erase("width"); }), "layer 0: \"channels\" in a plan without \"width\"");
}

// Version 3: channels as one hex bitmap per kept expert, 12 channels (2
// bytes, 4 digits) keeping 4; the expected ids are worked out by hand from the
// format's rule (byte b = channels 8b..8b+7, bit j = channel 8b+j).
TEST(PlanFormat, WidthPlansAsBitmaps) {
    json d = good_doc();
    d["version"] = 3;
    d["width"] = {{"n_ff", 12}, {"keep", 4}};
    d["layers"][0]["channel_bitmaps"] = {"0f00", "000f", "1109", "AA00"};
    d["layers"][1]["channel_bitmaps"] = {"0f00", "0f00", "000f", "3003"};
    reap::plan p;
    std::string err;
    ASSERT_TRUE(reap::parse_plan(d.dump(), "t.json", p, err)) << err;
    ASSERT_TRUE(p.has_width());
    EXPECT_EQ(p.layers[0].channels[0], (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(p.layers[0].channels[1], (std::vector<int64_t>{8, 9, 10, 11}));
    EXPECT_EQ(p.layers[0].channels[2], (std::vector<int64_t>{0, 4, 8, 11}));
    EXPECT_EQ(p.layers[0].channels[3], (std::vector<int64_t>{1, 3, 5, 7}));
    EXPECT_EQ(p.layers[1].channels[3], (std::vector<int64_t>{4, 5, 8, 9}));
    // written back lowercase, otherwise the same text
    const json back = json::parse(reap::plan_text(p));
    EXPECT_EQ(back["layers"][0]["channel_bitmaps"], json({"0f00", "000f", "1109", "aa00"}));
    EXPECT_EQ(reap::channel_bitmap({0, 4, 8, 11}, 12), "1109");
    EXPECT_EQ(reap::channel_bitmap({2, 9}, 10), "0402");

    auto with = [&](auto f) {
        json x = d;
        f(x);
        return x;
    };
    expect_reject(with([](json & x) { x["layers"][1].erase("channel_bitmaps"); }), "layer 2: missing field \"channel_bitmaps\"");
    expect_reject(with([](json & x) { x["layers"][1]["channel_bitmaps"] = "0f00"; }), "layer 2: \"channel_bitmaps\" must be an array");
    expect_reject(with([](json & x) { x["layers"][0]["channel_bitmaps"].erase(3); }),
                  "layer 0: \"channel_bitmaps\" has 3 bitmaps, n_keep is 4");
    expect_reject(with([](json & x) { x["layers"][0]["channel_bitmaps"][1] = 15; }),
                  "layer 0: channel_bitmaps[1] (source expert 1) must be a string, not integer");
    expect_reject(with([](json & x) { x["layers"][0]["channel_bitmaps"][1] = "0f0"; }),
                  "channel_bitmaps[1] (source expert 1) has 3 hex digits, 4 expected (12 channels, 8 per byte)");
    expect_reject(with([](json & x) { x["layers"][0]["channel_bitmaps"][1] = "0f000"; }), "has 5 hex digits, 4 expected");
    expect_reject(with([](json & x) { x["layers"][0]["channel_bitmaps"][2] = "0fg0"; }),
                  "channel_bitmaps[2] (source expert 0) has 'g' at 2, not a hex digit");
    expect_reject(with([](json & x) { x["layers"][0]["channel_bitmaps"][0] = "0710"; }),
                  "channel_bitmaps[0] (source expert 3) sets channel 12, beyond the 12 channels");
    expect_reject(with([](json & x) { x["layers"][0]["channel_bitmaps"][0] = "0f01"; }),
                  "keeps 5 channels, width.keep is 4");
    expect_reject(with([](json & x) { x["layers"][0]["channel_bitmaps"][0] = "0000"; }), "keeps 0 channels");
    expect_reject(with([](json & x) { x["layers"][0]["channels"] = json::parse("[[0,1,2,3],[4,5,6,7],[0,2,4,6],[1,3,5,7]]"); }),
                  "layer 0: \"channels\" in a version 3 plan");
    expect_reject(with([](json & x) { x.erase("width"); }), "layer 0: \"channel_bitmaps\" in a plan without \"width\"");
}

// Version 3's "shared_channel_bitmap" (llama4's shared expert, cut with the
// routed ones): one bitmap per layer, read as channel_bitmaps are (ids worked
// out by hand), written back; hostile values refused, naming the layer.
TEST(PlanFormat, SharedChannelBitmap) {
    json d = good_doc();
    d["version"] = 3;
    d["width"] = {{"n_ff", 12}, {"keep", 4}};
    d["layers"][0]["channel_bitmaps"] = {"0f00", "000f", "1109", "aa00"};
    d["layers"][1]["channel_bitmaps"] = {"0f00", "0f00", "000f", "3003"};
    d["layers"][0]["shared_channel_bitmap"] = "1109";
    d["layers"][1]["shared_channel_bitmap"] = "f000";
    reap::plan p;
    std::string err;
    ASSERT_TRUE(reap::parse_plan(d.dump(), "t.json", p, err)) << err;
    EXPECT_EQ(p.layers[0].shared_channels, (std::vector<int64_t>{0, 4, 8, 11}));
    EXPECT_EQ(p.layers[1].shared_channels, (std::vector<int64_t>{4, 5, 6, 7}));
    const json back = json::parse(reap::plan_text(p));
    EXPECT_EQ(back, reap::plan_to_json(p));
    EXPECT_EQ(back["layers"][0]["shared_channel_bitmap"], "1109");
    EXPECT_EQ(back["layers"][1]["shared_channel_bitmap"], "f000");
    // a plan without them writes none
    d["layers"][0].erase("shared_channel_bitmap");
    d["layers"][1].erase("shared_channel_bitmap");
    ASSERT_TRUE(reap::parse_plan(d.dump(), "t.json", p, err)) << err;
    EXPECT_TRUE(p.layers[0].shared_channels.empty());
    EXPECT_FALSE(json::parse(reap::plan_text(p))["layers"][0].contains("shared_channel_bitmap"));

    auto with = [&](auto f) {
        json x = d;
        x["layers"][1]["shared_channel_bitmap"] = "f000";
        f(x);
        return x;
    };
    expect_reject(with([](json & x) { x["layers"][1]["shared_channel_bitmap"] = 15; }),
                  "layer 2: shared_channel_bitmap must be a string, not integer");
    expect_reject(with([](json & x) { x["layers"][1]["shared_channel_bitmap"] = {"f000"}; }), "must be a string, not array");
    expect_reject(with([](json & x) { x["layers"][1]["shared_channel_bitmap"] = "f00"; }),
                  "layer 2: shared_channel_bitmap has 3 hex digits, 4 expected");
    expect_reject(with([](json & x) { x["layers"][1]["shared_channel_bitmap"] = "f0z0"; }), "has 'z' at 2, not a hex digit");
    expect_reject(with([](json & x) { x["layers"][1]["shared_channel_bitmap"] = "0080"; }),
                  "layer 2: shared_channel_bitmap sets channel 15, beyond the 12 channels");
    expect_reject(with([](json & x) { x["layers"][1]["shared_channel_bitmap"] = "f100"; }), "keeps 5 channels, width.keep is 4");
    expect_reject(with([](json & x) {
                      x.erase("width");
                      for (auto & l : x["layers"]) l.erase("channel_bitmaps");
                  }),
                  "layer 2: \"shared_channel_bitmap\" in a plan without \"width\"");
    json v2 = good_width_doc();
    v2["layers"][0]["shared_channel_bitmap"] = "0f";
    expect_reject(v2, "layer 0: shared_channel_bitmap in a version 2 plan");
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

TEST(PlanValidate, Width) {
    auto f = facts(8, 2, {1, 3});
    f.n_ff_exp = 512;
    f.down_block = 256;
    f.down_type_name = "q4_K";
    auto p = make(8, 2, 2, {{1, {7, 0}}, {3, {1, 2}}});
    p.width_n_ff = 512;
    p.width_keep = 256;
    std::vector<int64_t> low(256), high(256);
    for (int64_t c = 0; c < 256; ++c) low[size_t(c)] = c, high[size_t(c)] = 256 + c;
    for (auto & l : p.layers) l.channels = {low, high};
    std::string err;
    EXPECT_TRUE(reap::validate_plan(p, f, err)) << err;

    auto q = p;
    q.width_keep = 128;
    for (auto & l : q.layers) l.channels = {std::vector<int64_t>(low.begin(), low.begin() + 128), std::vector<int64_t>(high.begin(), high.begin() + 128)};
    expect_invalid(q, f, "width 128 is not a multiple of 256, the block size of q4_K (the down projections' type");
    expect_invalid(q, f, "smallest: 256");
    q = p;
    q.width_n_ff = 1024;
    expect_invalid(q, f, "made for experts of width 1024, the model's are 512");
    q = p;
    q.layers[1].channels.pop_back();
    expect_invalid(q, f, "layer 3: lists channels for 1 experts, keeps 2");
    q = p;
    std::swap(q.layers[0].channels[1][3], q.layers[0].channels[1][4]);
    expect_invalid(q, f, "layer 1: channels[1] must be 256 ascending channels in [0, 512)");
    auto g = f;
    g.n_ff_exp = 0;
    g.width_refusal = "blk.1.ffn_gate_up_exps.weight fuses gate and up";
    expect_invalid(p, g, "plan: cuts expert width, but blk.1.ffn_gate_up_exps.weight fuses gate and up");
    // expert-only plans ignore the width facts
    EXPECT_TRUE(reap::validate_plan(make(8, 2, 2, {{1, {7, 0}}, {3, {1, 2}}}), g, err)) << err;

    // a model whose shared expert is cut too (llama4): K ascending shared channels in every layer, else none
    auto sf = f;
    sf.shared_cut = true;
    expect_invalid(p, sf, "plan: layer 1: lists no shared-expert channels (llama.cpp's qwen3moe loader sizes its shared "
                          "expert with the routed experts' width, so a width plan keeps 256 ascending channels of it");
    auto sp = p;
    for (auto & l : sp.layers) l.shared_channels = high;
    EXPECT_TRUE(reap::validate_plan(sp, sf, err)) << err;
    auto sq = sp;
    sq.layers[1].shared_channels.pop_back();
    expect_invalid(sq, sf, "plan: layer 3: shared-expert channels (llama.cpp's");
    sq = sp;
    sq.layers[0].shared_channels[0] = 512;
    expect_invalid(sq, sf, "plan: layer 1: shared-expert channels");
    expect_invalid(sp, f, "plan: layer 1: lists shared-expert channels, but the model's shared experts (if any) are not cut in width");
    auto expert_only = make(8, 2, 2, {{1, {7, 0}}, {3, {1, 2}}});
    expert_only.layers[1].shared_channels = {0};
    expect_invalid(expert_only, f, "plan: layer 3: lists shared-expert channels, but the plan does not cut width");

    EXPECT_EQ(reap::width_refusal(256, 768, 256, "q4_K"), "");
    EXPECT_EQ(reap::width_refusal(100, 768, 1, "f32"), "");
    EXPECT_EQ(reap::width_refusal(300, 768, 256, "q4_K"),
              "width 300 is not a multiple of 256, the block size of q4_K (the down projections' type: their rows are "
              "requantised in whole blocks); nearest: 256 or 512");
    EXPECT_NE(reap::width_refusal(769, 768, 1, "f32").find("width 769 out of range [1, 768]"), std::string::npos);
    EXPECT_NE(reap::width_refusal(0, 768, 1, "f32").find("out of range"), std::string::npos);
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

// The width facts of real files: every zoo model has separate gate/up/down
// slabs of its expert_feed_forward_length (read here from make_zoo.py's
// shapes: the width is gate's ne[1]); a fused gate_up slab, a missing key or a
// per-layer array are refused with the reason.
TEST(PlanValidate, WidthFactsOfZooModels) {
    std::string err;
    const std::string zoo = prune_test::zoo_dir("prune-zoo", err);
    if (zoo.empty()) GTEST_SKIP() << err;
    for (const std::string & name : prune_test::zoo_names()) {
        SCOPED_TRACE(name);
        reap::gguf::model m;
        ASSERT_TRUE(reap::gguf::open_model(zoo + "/" + name + ".gguf", m, err)) << err;
        reap::moe::layout lay;
        ASSERT_TRUE(reap::model_layout(m, lay, err)) << err;
        const reap::plan_model_facts f = reap::facts_of(lay, m);
        bool shexp = false;
        for (const auto & t : m.tensors) shexp = shexp || t.name.find("_shexp") != std::string::npos;
        EXPECT_EQ(f.width_refusal, "");
        EXPECT_EQ(f.shared_cut, name == "llama4");
        if (name == "llama4") {
            // its one shared expert is n_ff wide with no key of its own: cut with the routed experts, its
            // three tensors checked against the loader's shapes (a wrong width, a missing one: refused)
            EXPECT_EQ(f.shared_width, 0);
            const std::string L = "blk." + std::to_string(lay.moe_layers.back()) + ".";
            reap::gguf::model bad = m;
            for (auto & t : bad.tensors) {
                if (t.name == L + "ffn_gate_shexp.weight") t.ne[1] = 16;
            }
            reap::plan_model_facts bf = reap::facts_of(lay, bad);
            EXPECT_FALSE(bf.shared_cut);
            EXPECT_NE(bf.width_refusal.find(L + "ffn_gate_shexp.weight [64, 16] is not the 2-D shared expert 32 channels wide"),
                      std::string::npos) << bf.width_refusal;
            bad = m;
            bad.tensors.erase(std::remove_if(bad.tensors.begin(), bad.tensors.end(),
                                             [&](const reap::gguf::tensor_info & t) { return t.name == L + "ffn_up_shexp.weight"; }),
                              bad.tensors.end());
            bf = reap::facts_of(lay, bad);
            EXPECT_NE(bf.width_refusal.find("has no " + L + "ffn_up_shexp.weight"), std::string::npos) << bf.width_refusal;
            continue;
        }
        if (shexp && name != "qwen2moe") {
            // deepseek2, glm4moe, kimi-k3: shared experts n_ff x expert_shared_count wide (make_zoo.py: count 1,
            // so S is ffn_gate_shexp's ne[1] and the experts' width); K must divide S
            int64_t S = 0;
            for (const auto & t : m.tensors) {
                if (t.name.find("ffn_gate_shexp.weight") != std::string::npos) S = t.ne[1];
            }
            ASSERT_EQ(S, 32);
            EXPECT_EQ(f.shared_width, S);
            reap::plan_model_facts f32 = f;   // down requantised to f32 (blocks of 1): only S limits K
            f32.down_block = 1;
            EXPECT_EQ(reap::width_refusal(16, f32), "");
            EXPECT_EQ(reap::width_refusal(8, f32), "");
            EXPECT_EQ(reap::width_refusal(24, f32),
                      "width 24 does not divide 32, the shared experts' width: they are kept whole as 32/K shared experts "
                      "of width K, so K must divide it; widths that fit: 1, 2, 4, 8, 16, 32");
            f32.down_block = 8;   // both rules: the list holds whole blocks only
            EXPECT_NE(reap::width_refusal(24, f32).find("widths that fit: 8, 16, 32"), std::string::npos);
            // the count is the rule's input: missing, it refuses; a shared tensor of another width refuses
            reap::gguf::model no_count = m;
            ASSERT_TRUE(no_count.kvs.remove(lay.arch + ".expert_shared_count"));
            reap::plan_model_facts nf = reap::facts_of(lay, no_count);
            EXPECT_NE(nf.width_refusal.find("but no " + lay.arch + ".expert_shared_count, which llama.cpp's"), std::string::npos)
                << nf.width_refusal;
            reap::gguf::model two = m;
            two.kvs.set_u32(lay.arch + ".expert_shared_count", 2);
            nf = reap::facts_of(lay, two);
            EXPECT_NE(nf.width_refusal.find(" channels wide, not " + lay.arch + ".expert_feed_forward_length x " + lay.arch +
                                            ".expert_shared_count = " + std::to_string(2 * f.n_ff_exp)), std::string::npos)
                << nf.width_refusal;
        } else {
            EXPECT_EQ(f.shared_width, 0);
        }
        const reap::gguf::tensor_info * gate = nullptr;
        int64_t down_block = 0;
        for (const auto & t : m.tensors) {
            if (t.name == "blk." + std::to_string(lay.moe_layers[0]) + ".ffn_gate_exps.weight") gate = &t;
            if (t.name.find("ffn_down_exps.weight") != std::string::npos) {
                down_block = std::max(down_block, reap::gguf::find_type(uint32_t(t.type))->block_size);
            }
        }
        ASSERT_NE(gate, nullptr);
        EXPECT_EQ(f.n_ff_exp, gate->ne[1]);
        EXPECT_EQ(f.down_block, down_block);

        // the same model with gate and up fused into one slab
        reap::gguf::model fused = m;
        for (auto & t : fused.tensors) {
            const size_t at = t.name.find("ffn_gate_exps");
            if (at != std::string::npos) t.name.replace(at, 13, "ffn_gate_up_exps");
        }
        reap::moe::layout flay;
        ASSERT_TRUE(reap::model_layout(fused, flay, err)) << err;
        reap::plan_model_facts ff = reap::facts_of(flay, fused);
        EXPECT_EQ(ff.n_ff_exp, 0);
        EXPECT_NE(ff.width_refusal.find("ffn_gate_up_exps.weight fuses gate and up"), std::string::npos) << ff.width_refusal;

        reap::gguf::model keyless = m;
        ASSERT_TRUE(keyless.kvs.remove(reap::moe::expert_width_key(lay.arch)));
        ff = reap::facts_of(lay, keyless);
        EXPECT_NE(ff.width_refusal.find("has no " + lay.arch + ".expert_feed_forward_length"), std::string::npos) << ff.width_refusal;

        reap::gguf::model arr = m;
        arr.kvs.set_i32_array(reap::moe::expert_width_key(lay.arch), std::vector<int32_t>(size_t(lay.n_layer), int32_t(f.n_ff_exp)));
        ff = reap::facts_of(lay, arr);
        EXPECT_NE(ff.width_refusal.find("is a per-layer array"), std::string::npos) << ff.width_refusal;

        if (name == "qwen2moe") {   // qwen2moe reads its shared experts' width from its own key; without it, from the experts'
            reap::gguf::model no_shared_key = m;
            ASSERT_TRUE(no_shared_key.kvs.remove(lay.arch + ".expert_shared_feed_forward_length"));
            ff = reap::facts_of(lay, no_shared_key);
            EXPECT_NE(ff.width_refusal.find("but no " + lay.arch + ".expert_shared_feed_forward_length"), std::string::npos)
                << ff.width_refusal;
        }
    }
}

namespace {

// The test's own reading of a plan document, from the rules in plan.h (not
// from plan.cpp): either the plan it describes, or the field whose check fails
// first (fields are checked in document order: format, version, model.arch,
// model.n_layer, model.n_expert, model.n_expert_used, n_keep, layers, then
// each layer's "layer" and "keep", then provenance). `needle` is a piece of
// text the message must then contain.
struct decoded {
    bool        ok = false;
    std::string needle;
    reap::plan  plan;
};

bool is_int(const json & v) { return v.is_number_integer() || v.is_number_unsigned(); }

// The integer value of `v` when it lies in [lo, hi].
bool int_in(const json & v, int64_t lo, int64_t hi, int64_t & out) {
    if (!is_int(v)) return false;
    if (v.is_number_unsigned()) {
        if (v.get<uint64_t>() > uint64_t(INT64_MAX)) return false;
        out = int64_t(v.get<uint64_t>());
    } else {
        out = v.get<int64_t>();
    }
    return out >= lo && out <= hi;
}

decoded decode(const std::string & text) {
    decoded d;
    auto fail = [&](const std::string & needle) { d.needle = needle; return d; };
    json doc;
    try {
        doc = json::parse(text);
    } catch (const json::parse_error &) {
        return fail("not valid JSON");
    }
    if (!doc.is_object()) return fail("top level");
    if (!doc.contains("format")) return fail("\"format\"");
    if (!(doc["format"].is_string() && doc["format"] == "reap-plan")) return fail("\"format\"");
    if (!doc.contains("version")) return fail("\"version\"");
    int64_t version = 0;
    if (!int_in(doc["version"], 0, INT32_MAX, version)) return fail("\"version\"");
    if (version < 1 || version > 3) return fail("version");
    if (!doc.contains("model")) return fail("\"model\"");
    const json & m = doc["model"];
    if (!m.is_object()) return fail("\"model\"");
    reap::plan & p = d.plan;
    if (!m.contains("arch")) return fail("\"arch\"");
    if (!m["arch"].is_string() || m["arch"].get<std::string>().empty()) return fail("model.arch");
    p.arch = m["arch"];
    if (!m.contains("n_layer")) return fail("\"n_layer\"");
    if (!int_in(m["n_layer"], 1, 1 << 20, p.n_layer)) return fail("model.n_layer");
    if (!m.contains("n_expert")) return fail("\"n_expert\"");
    if (!int_in(m["n_expert"], 1, 1 << 24, p.n_expert)) return fail("model.n_expert");
    if (!m.contains("n_expert_used")) return fail("\"n_expert_used\"");
    if (!int_in(m["n_expert_used"], 1, p.n_expert, p.n_expert_used)) return fail("model.n_expert_used");
    if (!doc.contains("n_keep")) return fail("\"n_keep\"");
    if (!int_in(doc["n_keep"], 1, p.n_expert, p.n_keep)) return fail("\"n_keep\"");
    if (!doc.contains("layers")) return fail("\"layers\"");
    const json & layers = doc["layers"];
    if (!layers.is_array() || layers.empty()) return fail("\"layers\"");
    for (size_t i = 0; i < layers.size(); ++i) {
        const json & l = layers[i];
        const std::string at = "layers[" + std::to_string(i) + "]";
        if (!l.is_object() || !l.contains("layer")) return fail(at);
        int64_t layer = 0;
        if (!int_in(l["layer"], 0, p.n_layer - 1, layer)) return fail(at + ".layer");
        const std::string lw = "layer " + std::to_string(layer);
        if (!p.layers.empty() && p.layers.back().layer >= layer) return fail(lw);
        if (!l.contains("keep") || !l["keep"].is_array() || int64_t(l["keep"].size()) != p.n_keep) return fail(lw);
        std::set<int64_t> seen;
        reap::plan_layer pl;
        pl.layer = int(layer);
        for (size_t k = 0; k < l["keep"].size(); ++k) {
            int64_t e = 0;
            if (!int_in(l["keep"][k], 0, p.n_expert - 1, e) || !seen.insert(e).second) return fail(lw);
            pl.keep.push_back(e);
        }
        p.layers.push_back(pl);
    }
    if (doc.contains("provenance")) {
        if (!doc["provenance"].is_object()) return fail("\"provenance\"");
        p.provenance = doc["provenance"];
    }
    d.ok = true;
    return d;
}

// Damage that keeps the document JSON: a field removed, or set to a value of
// another type or out of its range, an id repeated, layers swapped.
void damage_tree(json & d, std::mt19937 & rng) {
    static const json values[] = {json(), json(true), json(-1), json(0), json(1), json(2), json(3), json(7), json(8),
                                  json(9), json(2.0), json("1"), json(""), json::array(), json::object(),
                                  json(18446744073709551615ull), json(-9223372036854775807ll - 1)};
    static const char * top[] = {"format", "version", "model", "n_keep", "layers", "provenance"};
    const json value = values[rng() % (sizeof(values) / sizeof(values[0]))];
    switch (rng() % 8) {
        case 0: d.erase(top[rng() % 6]); break;
        case 1: d[top[rng() % 6]] = value; break;
        case 2: { const char * k[] = {"arch", "n_layer", "n_expert", "n_expert_used"};
                  if (rng() % 4) d["model"][k[rng() % 4]] = value; else d["model"].erase(k[rng() % 4]); break; }
        case 3: d["layers"][rng() % 2]["layer"] = value; break;
        case 4: d["layers"][rng() % 2]["keep"][rng() % 4] = value; break;
        // The source is copied before the destination is made: making it may
        // grow the array and move the source (C++17 evaluates the right side first).
        case 5: { const json source = d["layers"][rng() % 2]["keep"][rng() % 4];
                  d["layers"][rng() % 2]["keep"][rng() % 4] = source; break; }
        case 6: { json & layers = d["layers"];
                  layers[1];  // grows a shorter array first, so that layers[0] stays put
                  std::swap(layers[0], layers[1]); break; }
        default: d["layers"][rng() % 2].erase(rng() % 2 ? "keep" : "layer"); break;
    }
}

} // namespace

// Seeded random damage to a good document: byte flips, truncations and
// spliced bytes on the text, and type/range/structure damage on the JSON tree.
// Whatever parse_plan decides must be what the test's own reading of the
// format decides: a rejection names the field the test finds wrong first, and
// an accepted document gives exactly the plan the test decodes. Both outcomes
// must occur, or the damage proves nothing.
TEST(PlanFormat, RandomDamageAgreesWithAnIndependentReading) {
    const std::string good = good_doc().dump();
    std::mt19937 rng(1234);
    int accepted = 0, rejected_json = 0, rejected_field = 0;
    for (int i = 0; i < 6000; ++i) {
        std::string s;
        if (i % 2 == 0) {
            s = good;
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
        } else {
            json d = good_doc();
            const int n_edits = int(rng() % 3);   // 0: the good document itself
            for (int k = 0; k < n_edits; ++k) {
                try {
                    damage_tree(d, rng);
                } catch (const json::exception &) {
                    // the damage addressed a part an earlier edit removed: keep what is there
                }
            }
            s = d.dump();
        }
        const decoded want = decode(s);
        reap::plan p;
        std::string err;
        const bool ok = reap::parse_plan(s, "fuzz.json", p, err);
        ASSERT_EQ(ok, want.ok) << "document: " << s << "\nreap: " << (ok ? "accepted" : err)
                               << "\ntest: " << (want.ok ? "accepted" : "rejected at " + want.needle);
        if (!ok) {
            EXPECT_NE(err.find("fuzz.json"), std::string::npos) << err;
            EXPECT_NE(err.find(want.needle), std::string::npos) << "document: " << s << "\nmessage: " << err
                                                                << "\nexpected it to name: " << want.needle;
            ++(want.needle == "not valid JSON" ? rejected_json : rejected_field);
            continue;
        }
        ++accepted;
        EXPECT_EQ(reap::plan_to_json(p), reap::plan_to_json(want.plan)) << s;
        EXPECT_EQ(p.arch, want.plan.arch);
        EXPECT_EQ(p.n_layer, want.plan.n_layer);
        EXPECT_EQ(p.n_expert, want.plan.n_expert);
        EXPECT_EQ(p.n_expert_used, want.plan.n_expert_used);
        EXPECT_EQ(p.n_keep, want.plan.n_keep);
        ASSERT_EQ(p.layers.size(), want.plan.layers.size()) << s;
        for (size_t l = 0; l < p.layers.size(); ++l) {
            EXPECT_EQ(p.layers[l].layer, want.plan.layers[l].layer) << s;
            EXPECT_EQ(p.layers[l].keep, want.plan.layers[l].keep) << s;
        }
        EXPECT_EQ(p.provenance, want.plan.provenance) << s;
    }
    std::printf("random damage: %d accepted, %d rejected as JSON, %d rejected at a field\n", accepted, rejected_json,
                rejected_field);
    EXPECT_GT(accepted, 300);
    EXPECT_GT(rejected_json, 300);
    EXPECT_GT(rejected_field, 300);
}
