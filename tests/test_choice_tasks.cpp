// The task readers, the draw of --tasks-limit, and the statistics of task
// evidence, against values computed by other means: files built here byte by
// byte in llama-perplexity's layout (and every truncation and seeded damage of
// one), the Wilson interval's published value for 8 of 10, McNemar's exact
// p-values from binomial sums done by hand in exact fractions, and the task
// file's reader refusing numbers that its per-task flags do not give.
#include "formats/task_file.h"
#include "metrics/choice_tasks.h"
#include "metrics/task_stats.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

using namespace reap;

namespace {

void put_u32(std::string & b, uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back((char) ((v >> (8 * i)) & 0xff));
}
void put_str(std::string & b, const std::string & s) {
    put_u32(b, (uint32_t) s.size());
    b += s;
}

struct mc_task {
    std::string question;
    std::vector<std::string> answers;
    std::vector<int32_t> labels;
};

std::string binary_file(const std::vector<mc_task> & tasks) {
    std::vector<std::string> bodies;
    for (const auto & t : tasks) {
        std::string b;
        put_str(b, t.question);
        put_u32(b, (uint32_t) t.answers.size());
        for (const auto & a : t.answers) put_str(b, a);
        for (int32_t l : t.labels) put_u32(b, (uint32_t) l);
        put_u32(b, 0);
        bodies.push_back(b);
    }
    std::string out;
    put_u32(out, (uint32_t) tasks.size());
    uint32_t at = 4 + 4 * (uint32_t) tasks.size();
    for (const auto & b : bodies) {
        put_u32(out, at);
        at += (uint32_t) b.size();
    }
    for (const auto & b : bodies) out += b;
    return out;
}

const std::vector<mc_task> k_tasks = {
    {"The sky is", {"blue", "green", "loud"}, {1, 0, 0}},
    {"Two plus two is", {"three", "four"}, {0, 1}},
    {"Water boils at", {"100 C", "10 C", "0 C", "50 C"}, {1, 0, 0, 0}},
};

} // namespace

TEST(ChoiceTasks, BinaryFileReadsAsWritten) {
    choice_set s;
    std::string err;
    ASSERT_TRUE(parse_choice_set(choice_format::multiple_choice, binary_file(k_tasks), "t.bin", s, err)) << err;
    ASSERT_EQ(s.tasks.size(), 3u);
    EXPECT_EQ(s.tasks[1].texts, (std::vector<std::string>{"Two plus two is three", "Two plus two is four"}));
    EXPECT_EQ(s.tasks[1].correct, (std::vector<uint8_t>{0, 1}));
    EXPECT_EQ(s.tasks[2].index, 2u);
}

TEST(ChoiceTasks, EveryTruncationAndSeededDamageOfABinaryFileIsRefusedOrReadWhole) {
    const std::string good = binary_file(k_tasks);
    std::string err;
    choice_set s;
    for (size_t n = 0; n < good.size(); ++n) {
        EXPECT_FALSE(parse_choice_set(choice_format::multiple_choice, good.substr(0, n), "t.bin", s, err)) << "truncated at " << n;
        EXPECT_FALSE(err.empty());
    }
    EXPECT_FALSE(parse_choice_set(choice_format::multiple_choice, good + "x", "t.bin", s, err));
    EXPECT_NE(err.find("after the last task"), std::string::npos) << err;
    // a damaged byte is refused, or read with every count and label in range
    std::mt19937 rng(7);
    for (int trial = 0; trial < 2000; ++trial) {
        std::string bad = good;
        bad[rng() % bad.size()] = (char) (rng() & 0xff);
        err.clear();
        if (parse_choice_set(choice_format::multiple_choice, bad, "t.bin", s, err)) {
            for (const auto & t : s.tasks) {
                ASSERT_GE(t.texts.size(), 2u);
                ASSERT_EQ(t.texts.size(), t.correct.size());
                bool any = false;
                for (uint8_t c : t.correct) any = any || c;
                ASSERT_TRUE(any);
            }
        } else {
            ASSERT_FALSE(err.empty());
        }
    }
}

TEST(ChoiceTasks, BadBinaryTasksAreNamed) {
    std::string err;
    choice_set s;
    auto refused = [&](std::vector<mc_task> t, const std::string & what) {
        EXPECT_FALSE(parse_choice_set(choice_format::multiple_choice, binary_file(t), "t.bin", s, err)) << what;
        EXPECT_NE(err.find(what), std::string::npos) << err;
    };
    auto t = k_tasks;
    t[1].labels = {0, 2};
    refused(t, "task 1 (at byte");
    refused(t, "label 2 of answer 1 is not 0 or 1");
    t = k_tasks;
    t[2].labels = {0, 0, 0, 0};
    refused(t, "no answer is labelled correct");
    t = k_tasks;
    t[0].answers[1] = "";
    refused(t, "answer 1 is empty");
    t = k_tasks;
    t[0].answers = {"only"};
    t[0].labels = {1};
    refused(t, "a choice needs at least 2");
    std::string huge;
    put_u32(huge, 1u << 30);
    EXPECT_FALSE(parse_choice_set(choice_format::multiple_choice, huge + std::string(64, '\0'), "t.bin", s, err));
    EXPECT_NE(err.find("more than its"), std::string::npos) << err;
    std::string offs = binary_file(k_tasks);
    offs[4] += 1;   // the first task's offset
    EXPECT_FALSE(parse_choice_set(choice_format::multiple_choice, offs, "t.bin", s, err));
    EXPECT_NE(err.find("offset table says"), std::string::npos) << err;
    std::string many;
    put_u32(many, 1);
    put_u32(many, 8);
    put_str(many, "q");
    put_u32(many, 101);
    many += std::string(2000, '\0');
    EXPECT_FALSE(parse_choice_set(choice_format::multiple_choice, many, "t.bin", s, err));
    EXPECT_NE(err.find("101 answers"), std::string::npos) << err;
}

TEST(ChoiceTasks, HellaswagAndWinogrande) {
    choice_set s;
    std::string err;
    const std::string hs = "A man walks\n2\ne0\ne1\ne2\ne3\nB\n0\nf0\nf1\nf2\nf3\n";
    ASSERT_TRUE(parse_choice_set(choice_format::hellaswag, hs, "h.txt", s, err)) << err;
    ASSERT_EQ(s.tasks.size(), 2u);
    EXPECT_EQ(s.tasks[0].texts[2], "A man walks e2");
    EXPECT_EQ(s.tasks[0].correct, (std::vector<uint8_t>{0, 0, 1, 0}));
    EXPECT_FALSE(parse_choice_set(choice_format::hellaswag, hs.substr(0, hs.size() - 3), "h.txt", s, err));
    EXPECT_NE(err.find("not a positive multiple of 6"), std::string::npos) << err;
    EXPECT_FALSE(parse_choice_set(choice_format::hellaswag, "A\n4\na\nb\nc\nd\n", "h.txt", s, err));
    EXPECT_NE(err.find("not 0..3"), std::string::npos) << err;

    const std::string wg = "index,sentence,option1,option2,answer\n"
                           "0,Sarah was better than Maria so _ got the easy cases.,Sarah,Maria,2\n"
                           "1,\"He said, then, that _ won.\",Tom,Ann,1\n";
    ASSERT_TRUE(parse_choice_set(choice_format::winogrande, wg, "w.csv", s, err)) << err;
    ASSERT_EQ(s.tasks.size(), 2u);
    EXPECT_TRUE(s.winogrande_header);
    EXPECT_TRUE(s.winogrande_last_line_dropped) << "llama-perplexity stops at the line that ends the text";
    EXPECT_EQ(s.tasks[0].texts[1], "Sarah was better than Maria so Maria got the easy cases.");
    EXPECT_EQ(s.tasks[0].prefixes[1], "Sarah was better than Maria so Maria");
    EXPECT_EQ(s.tasks[1].texts[0], "He said, then, that Tom won.");
    EXPECT_EQ(s.tasks[1].correct, (std::vector<uint8_t>{1, 0}));
    ASSERT_TRUE(parse_choice_set(choice_format::winogrande, wg + "\n", "w.csv", s, err)) << err;
    EXPECT_FALSE(s.winogrande_last_line_dropped);
    EXPECT_FALSE(parse_choice_set(choice_format::winogrande, wg + "2,No blank here.,a,b,1\n", "w.csv", s, err));
    EXPECT_NE(err.find("line 4: the sentence has no '_'"), std::string::npos) << err;
    EXPECT_FALSE(parse_choice_set(choice_format::winogrande, wg + "2,A _ b.,a,b,3\n", "w.csv", s, err));
    EXPECT_NE(err.find("line 4: the answer is '3'"), std::string::npos) << err;
    EXPECT_FALSE(parse_choice_set(choice_format::winogrande, wg + "2,A _ b.\n", "w.csv", s, err));
    EXPECT_NE(err.find("line 4: not 5 comma-separated fields"), std::string::npos) << err;
}

TEST(ChoiceTasks, TheLimitDrawsDistinctTasksAndHellaswagAlwaysShuffles) {
    choice_set s;
    s.format = choice_format::multiple_choice;
    s.tasks.resize(50);
    EXPECT_EQ(select_choice_tasks(s, 0).size(), 50u);
    EXPECT_EQ(select_choice_tasks(s, 0)[7], 7u);
    for (choice_format f : {choice_format::multiple_choice, choice_format::winogrande, choice_format::hellaswag}) {
        s.format = f;
        const auto pick = select_choice_tasks(s, 20);
        ASSERT_EQ(pick.size(), 20u);
        EXPECT_EQ(std::set<size_t>(pick.begin(), pick.end()).size(), 20u);
        for (size_t i : pick) EXPECT_LT(i, 50u);
    }
    s.format = choice_format::hellaswag;
    const auto all = select_choice_tasks(s, 0);
    ASSERT_EQ(all.size(), 50u);
    EXPECT_EQ(std::set<size_t>(all.begin(), all.end()).size(), 50u);
    bool shuffled = false;
    for (size_t i = 0; i < all.size(); ++i) shuffled = shuffled || all[i] != i;
    EXPECT_TRUE(shuffled);
}

TEST(TaskStats, WilsonAndMcNemarAgainstHandValues) {
    const interval ci = wilson_interval(8, 10);   // the textbook 8/10: [0.4902, 0.9433]
    EXPECT_NEAR(ci.low, 0.4902, 5e-5);
    EXPECT_NEAR(ci.high, 0.9433, 5e-5);
    EXPECT_EQ(wilson_interval(0, 0).low, 0);
    EXPECT_EQ(wilson_interval(0, 0).high, 1);
    // 2 * sum_{i <= k} C(n, i) / 2^n, in exact fractions
    EXPECT_DOUBLE_EQ(mcnemar_exact_p(0, 5), 2.0 / 32);
    EXPECT_DOUBLE_EQ(mcnemar_exact_p(10, 0), 2.0 / 1024);
    EXPECT_NEAR(mcnemar_exact_p(3, 7), 2.0 * 176 / 1024, 1e-12);
    EXPECT_NEAR(mcnemar_exact_p(7, 3), 2.0 * 176 / 1024, 1e-12);
    EXPECT_EQ(mcnemar_exact_p(5, 5), 1.0);
    EXPECT_EQ(mcnemar_exact_p(0, 0), 1.0);
    // n = 60, k = 20: 2 * sum_{i<=20} C(60, i) / 2^60 = 0.0134893 (exact fractions)
    EXPECT_NEAR(mcnemar_exact_p(20, 40), 0.0134893, 1e-6);
    const paired_result p = paired_against({1, 1, 0, 0, 1}, {0, 1, 1, 0, 0});
    EXPECT_EQ(p.right_to_wrong, 2u);
    EXPECT_EQ(p.wrong_to_right, 1u);
    EXPECT_DOUBLE_EQ(p.p_value, 1.0);
}

TEST(TaskFile, RoundTripsAndRefusesNumbersItsFlagsDoNotGive) {
    task_document d;
    choice_section & s = d.choice.emplace();
    choice_report & r = s.report;
    r.task_format = "multiple-choice";
    r.data_path = "c.bin";
    r.data_sha256 = std::string(64, 'a');
    r.data_tasks = 10;
    r.tasks = {0, 1, 2, 3, 4};
    r.n_ctx = 128, r.n_seq = 4, r.n_batch = 512, r.n_ubatch = 512;
    r.models = {{"base", false, {0, 1, 2, 0, 1}, {1, 1, 1, 0, 1}}, {"p.json", true, {0, 2, 2, 1, 0}, {1, 0, 1, 1, 0}}};
    const nlohmann::json j = nlohmann::json::parse(task_document_to_json(d).dump());
    task_document back;
    std::string err;
    ASSERT_TRUE(task_document_from_json(j, "t.json", back, err)) << err << "\n" << j.dump();
    ASSERT_TRUE(back.choice);
    EXPECT_EQ(back.choice->report.models[1].correct, r.models[1].correct);
    EXPECT_EQ(j["choice"]["models"][1]["paired"]["right_to_wrong"], 2);
    EXPECT_EQ(j["choice"]["models"][1]["paired"]["wrong_to_right"], 1);
    auto refused = [&](const std::function<void(nlohmann::json &)> & damage, const std::string & what) {
        nlohmann::json bad = j;
        damage(bad);
        EXPECT_FALSE(task_document_from_json(bad, "t.json", back, err)) << what;
        EXPECT_NE(err.find(what), std::string::npos) << err;
    };
    refused([](nlohmann::json & b) { b["choice"]["models"][0]["n_correct"] = 5; }, "n_correct");
    refused([](nlohmann::json & b) { b["choice"]["models"][1]["accuracy"] = 0.9; }, "accuracy");
    refused([](nlohmann::json & b) { b["choice"]["models"][1]["paired"]["p_value"] = 0.001; }, "p_value");
    refused([](nlohmann::json & b) { b["choice"]["models"][1]["correct"][0] = 2; }, "correct");
    refused([](nlohmann::json & b) { b["choice"]["models"][0]["masked"] = true; }, "first model is the base");
    refused([](nlohmann::json & b) { b["choice"]["tasks"][0] = 10; }, "not a task of the file");
    refused([](nlohmann::json & b) { b["version"] = 2; }, "version");
}
