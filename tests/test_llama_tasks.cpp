// reap eval's task accuracy (--multiple-choice, --hellaswag, --winogrande)
// against stock llama-perplexity, on task sets tools/make_choice_tasks.py
// builds from the held-out split, and on the REAP cuts of reap-moe-tiny:
//   * a pruned file's accuracy and task count equal llama-perplexity's on the
//     same file and data (-c 128, the same --*-tasks); task for task where
//     llama-perplexity prints each task (its running counts give which tasks
//     were right; Winogrande prints each pick);
//   * the mask of the same plan gives the file's picks, task for task;
//   * the base is well above chance on the multiple-choice set, the 50% cut
//     loses more than its interval and McNemar's test says so; the 25% cut's
//     p-value is whatever it is (printed);
//   * bad task files are refused with exit 2 before any model loads, nothing
//     on stdout.
#include "llama_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sstream>

using namespace reap_test;

namespace {

std::string slurp(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// An exclusive lock on DIR/.lock while a fixture is made: ctest runs each
// test in its own process, two at a time, and both would write the same files.
struct fixture_lock {
    int fd = -1;
    explicit fixture_lock(const std::string & dir) {
        fd = ::open((dir + "/.lock").c_str(), O_CREAT | O_RDWR, 0644);
        if (fd >= 0) ::flock(fd, LOCK_EX);
    }
    ~fixture_lock() {
        if (fd >= 0) ::close(fd);   // closing releases the lock
    }
};

// What a fixture was made with: each file's size and modification time (the
// reap binary, the generator). A fixture whose DIR/.made holds the same key
// is taken as it is: the first of ctest's parallel processes makes it, under
// the lock, and the others read it, never while it is rewritten.
std::string fixture_key(const std::vector<std::string> & files) {
    std::string key;
    for (const auto & f : files) {
        struct stat st{};
        ::stat(f.c_str(), &st);
        key += f + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
               std::to_string(st.st_mtim.tv_nsec) + "\n";
    }
    return key;
}

// Runs `make` unless DIR/.made says the fixture was made with `key`; "" or the error.
std::string make_fixture_once(const std::string & dir, const std::string & key, const std::function<std::string()> & make) {
    const fixture_lock lock(dir);
    if (slurp(dir + "/.made") == key) return "";
    ::unlink((dir + "/.made").c_str());
    const std::string error = make();
    if (error.empty()) std::ofstream(dir + "/.made") << key;
    return error;
}

// The tasks, the archive and the cuts, made once per test binary run.
struct task_fixture {
    std::string dir, model, choice, hellaswag, winogrande, plan50, plan25, pruned50, error;
};

const char * k_rt = " -c 128 -t 1";

const task_fixture & fixture() {
    static task_fixture f = [] {
        task_fixture x;
        x.dir = test_tmp_dir() + "/tasks";
        ::mkdir(x.dir.c_str(), 0755);
        x.model = source_dir() + "/models/reap-moe-tiny.gguf";
        const std::string reap = shell_quote(reap_bin()), calib = x.dir + "/calib.jsonl", sal = x.dir + "/saliency.gguf";
        std::string out, err;
        x.choice = x.dir + "/choice.bin", x.hellaswag = x.dir + "/hellaswag.txt", x.winogrande = x.dir + "/winogrande.csv";
        x.plan50 = x.dir + "/plan50.json", x.plan25 = x.dir + "/plan25.json", x.pruned50 = x.dir + "/pruned50.gguf";
        const std::vector<std::string> steps = {
            python() + " " + shell_quote(source_dir() + "/tools/make_choice_tasks.py") + " --heldout " +
                shell_quote(source_dir() + "/data/corpus/heldout.jsonl") + " --out " + shell_quote(x.dir) + " --tasks 200",
            reap + " calibrate -m " + shell_quote(x.model) + " --corpus " + shell_quote(calib) + " -o " + shell_quote(sal) +
                " -c 256 -np 1 -t 1 --force --no-progress",
            reap + " plan " + shell_quote(sal) + " -m " + shell_quote(x.model) + " --ratio 0.5 --force -o " + shell_quote(x.plan50),
            reap + " plan " + shell_quote(sal) + " -m " + shell_quote(x.model) + " --ratio 0.25 --force -o " + shell_quote(x.plan25),
            reap + " prune -m " + shell_quote(x.model) + " --plan " + shell_quote(x.plan50) + " --force -o " + shell_quote(x.pruned50),
        };
        x.error = make_fixture_once(x.dir, fixture_key({reap_bin(), source_dir() + "/tools/make_choice_tasks.py"}), [&]() -> std::string {
            if (!corpus_subset("calib", calib, {}, 3000, err)) return err;
            for (const std::string & s : steps) {
                if (run_cmd(s, out) != 0) return s + ":\n" + out;
            }
            return "";
        });
        return x;
    }();
    return f;
}

nlohmann::json eval_json(const std::string & args, std::string & out) {
    // per process: ctest runs tests of this file side by side, some with the same arguments
    const std::string path = fixture().dir + "/eval-" + std::to_string(::getpid()) + "-" + std::to_string(std::hash<std::string>()(args)) + ".json";
    if (run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(fixture().model) + " " + args + k_rt + " -q --json > " +
                    shell_quote(path), out) != 0) {
        return nullptr;
    }
    return nlohmann::json::parse(slurp(path));
}

// llama-perplexity's per-task lines "N<TAB>number..." in order: the first number of each.
std::vector<double> per_task_numbers(const std::string & log, std::vector<std::vector<std::string>> * fields = nullptr) {
    std::vector<double> v;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
        const size_t tab = line.find('\t');
        if (tab == std::string::npos || tab == 0 || line.find_first_not_of("0123456789") != tab) continue;
        if (std::stoul(line.substr(0, tab)) != v.size() + 1) continue;
        v.push_back(std::strtod(line.c_str() + tab + 1, nullptr));
        if (fields) {
            std::istringstream ws(line);
            std::vector<std::string> f;
            for (std::string w; ws >> w;) f.push_back(w);
            fields->push_back(f);
        }
    }
    return v;
}

// Which tasks were right, from running accuracies in percent (task i's count is round(acc_i * i / 100)).
std::vector<int> right_from_running(const std::vector<double> & acc) {
    std::vector<int> right;
    long prev = 0;
    for (size_t i = 0; i < acc.size(); ++i) {
        const long n = std::lround(acc[i] * (double) (i + 1) / 100.0);
        right.push_back((int) (n - prev));
        prev = n;
    }
    return right;
}

// reap eval -p FILE --mask PLAN against llama-perplexity -m FILE, on one format.
void expect_equals_llama_perplexity(const std::string & flag, const std::string & file, const std::string & lp_limit,
                                    const std::string & reap_limit, size_t n_expected) {
    const task_fixture & f = fixture();
    ASSERT_TRUE(f.error.empty()) << f.error;
    std::string out;
    const nlohmann::json j = eval_json("-p " + shell_quote(f.pruned50) + " --mask " + shell_quote(f.plan50) + " " + flag + " " +
                                       shell_quote(file) + reap_limit, out);
    ASSERT_TRUE(j.is_object()) << out;
    const auto & models = j["choice"]["models"];
    ASSERT_EQ(models.size(), 3u);
    const auto & file_m = models[1], & mask_m = models[2];
    ASSERT_FALSE(file_m["masked"].get<bool>());
    ASSERT_EQ(j["choice"]["tasks"].size(), n_expected);
    EXPECT_EQ(file_m["picked"], mask_m["picked"]) << "the mask picks what its file picks, task for task";
    EXPECT_EQ(file_m["correct"], mask_m["correct"]);

    std::string lp;
    const std::string needle = "\n" + std::to_string(n_expected) + "\t";
    ASSERT_EQ(run_llama_perplexity("-m " + shell_quote(f.pruned50) + " " + flag + " -f " + shell_quote(file) + lp_limit + k_rt,
                                   needle, lp), 0) << lp;
    std::vector<std::vector<std::string>> fields;
    const std::vector<double> running = per_task_numbers(lp, &fields);
    ASSERT_EQ(running.size(), n_expected) << lp;
    const std::vector<uint8_t> correct = file_m["correct"].get<std::vector<uint8_t>>();
    if (flag == "--winogrande") {
        // each line: N, running accuracy, score 1, score 2, the pick (1|2), the answer
        for (size_t t = 0; t < n_expected; ++t) {
            ASSERT_EQ(fields[t].size(), 6u) << lp;
            EXPECT_EQ(std::stoi(fields[t][4]) - 1, file_m["picked"][t].get<int>()) << "task " << t;
        }
    } else {
        const std::vector<int> right = right_from_running(running);
        for (size_t t = 0; t < n_expected; ++t) EXPECT_EQ(right[t], (int) correct[t]) << "task " << t;
    }
    EXPECT_NEAR(running.back(), 100.0 * file_m["accuracy"].get<double>(), 1e-4) << lp;
}

} // namespace

TEST(Tasks, MultipleChoiceEqualsLlamaPerplexityAndTheMaskItsFile) {
    expect_equals_llama_perplexity("--multiple-choice", fixture().choice, "", "", 200);
}

TEST(Tasks, HellaswagEqualsLlamaPerplexityAndTheMaskItsFile) {
    expect_equals_llama_perplexity("--hellaswag", fixture().hellaswag, " --hellaswag-tasks 80", " --tasks-limit 80", 80);
}

TEST(Tasks, WinograndeEqualsLlamaPerplexityAndTheMaskItsFile) {
    expect_equals_llama_perplexity("--winogrande", fixture().winogrande, "", "", 200);
}

TEST(Tasks, WinograndeLimitDrawsLlamaPerplexitysTasks) {
    expect_equals_llama_perplexity("--winogrande", fixture().winogrande, " --winogrande-tasks 50", " --tasks-limit 50", 50);
}

TEST(Tasks, TheHalfCutLosesMoreThanItsIntervalAndThePairedTestSaysSo) {
    const task_fixture & f = fixture();
    ASSERT_TRUE(f.error.empty()) << f.error;
    std::string out;
    const nlohmann::json j = eval_json("--mask " + shell_quote(f.plan50) + " --mask " + shell_quote(f.plan25) + " --multiple-choice " +
                                       shell_quote(f.choice), out);
    ASSERT_TRUE(j.is_object()) << out;
    const auto & m = j["choice"]["models"];
    const double base = m[0]["accuracy"], half = m[1]["accuracy"], quarter = m[2]["accuracy"];
    // chance is 0.25; the set is make demo's (200 tasks, the generator's
    // defaults): the base scored 0.610 on it when this was written, from a
    // corpus of Debian bookworm's packages (data/corpus/manifest.json)
    EXPECT_GE(base, 0.60) << "the base should be well above chance (0.25) on its own held-out passages";
    EXPECT_GT(base, m[1]["ci95"][1].get<double>()) << "the 50% cut's interval " << m[1]["ci95"] << " holds the base's " << base;
    EXPECT_LT(m[1]["paired"]["p_value"].get<double>(), 0.05) << m[1]["paired"];
    EXPECT_GT(m[1]["paired"]["right_to_wrong"].get<int>(), m[1]["paired"]["wrong_to_right"].get<int>());
    printf("multiple-choice: base %.3f, 50%% cut %.3f (p %.3g), 25%% cut %.3f (p %.3g)\n", base, half,
           m[1]["paired"]["p_value"].get<double>(), quarter, m[2]["paired"]["p_value"].get<double>());
    // the table says the same
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(f.model) + " --mask " + shell_quote(f.plan50) +
                      " --multiple-choice " + shell_quote(f.choice) + k_rt + " -q", out), 0) << out;
    EXPECT_NE(out.find("McNemar p"), std::string::npos) << out;
    EXPECT_NE(out.find("masked by " + f.plan50), std::string::npos) << out;
}

TEST(Tasks, BadTaskFilesAreRefusedBeforeAModelLoads) {
    const task_fixture & f = fixture();
    ASSERT_TRUE(f.error.empty()) << f.error;
    const std::string good = slurp(f.choice), d = f.dir + "/bad";
    ::mkdir(d.c_str(), 0755);
    auto write = [&](const std::string & name, const std::string & bytes) {
        std::ofstream(d + "/" + name, std::ios::binary) << bytes;
        return d + "/" + name;
    };
    std::string label2 = good;
    // the first task's first label: after the count, the offsets, the question and the answers
    {
        auto u32 = [&](size_t at) { uint32_t v; std::memcpy(&v, label2.data() + at, 4); return v; };
        size_t at = 4 + 4 * u32(0);
        at += 4 + u32(at);                  // question
        const uint32_t n = u32(at);
        at += 4;
        for (uint32_t i = 0; i < n; ++i) at += 4 + u32(at);
        const uint32_t two = 2;
        std::memcpy(&label2[at], &two, 4);
    }
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"--multiple-choice " + write("trunc.bin", good.substr(0, good.size() / 2)), "the file ends inside"},
        {"--multiple-choice " + write("huge.bin", std::string("\xff\xff\xff\x7f", 4) + good.substr(4)), "more than its"},
        {"--multiple-choice " + write("label.bin", label2), "is not 0 or 1"},
        {"--winogrande " + write("w.csv", "0,No blank.,a,b,1\n"), "has no '_'"},
        {"--hellaswag " + write("h.txt", "ctx\n7\na\nb\nc\nd\n"), "not 0..3"},
    };
    for (const auto & [args, msg] : cases) {
        std::string out;
        EXPECT_EQ(run_cmd("(" + shell_quote(reap_bin()) + " eval -m " + shell_quote(f.model) + " --mask " + shell_quote(f.plan50) +
                              " " + args + k_rt + " -q --json 2>/dev/null)", out), 2) << args;
        EXPECT_TRUE(out.empty()) << args << ": wrote " << out;
        run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(f.model) + " " + args + k_rt + " -q", out);
        EXPECT_NE(out.find(msg), std::string::npos) << args << ": " << out;
    }
    std::string out;
    EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(f.model) + " --tasks-limit 5 -f " + shell_quote(f.hellaswag) + k_rt, out), 2);
    EXPECT_NE(out.find("--tasks-limit is for the multiple-choice files: give --multiple-choice"), std::string::npos) << out;
}

namespace {

// reap-moe-chat, its 50% REAP cut (calibrated on its own), and the generative task files.
struct gen_fixture {
    std::string dir, chat, recall, plan50, pruned50, chat_tasks, recall_tasks, error;
};

const gen_fixture & gen() {
    static gen_fixture g = [] {
        gen_fixture x;
        x.dir = test_tmp_dir() + "/gen-tasks";
        ::mkdir(x.dir.c_str(), 0755);
        x.chat = source_dir() + "/models/reap-moe-chat.gguf";
        x.recall = source_dir() + "/models/reap-moe-recall.gguf";
        x.plan50 = x.dir + "/plan50.json", x.pruned50 = x.dir + "/pruned50.gguf";
        x.chat_tasks = x.dir + "/chat.jsonl", x.recall_tasks = x.dir + "/recall.jsonl";
        const std::string reap = shell_quote(reap_bin()), calib = x.dir + "/calib.jsonl", sal = x.dir + "/saliency.gguf";
        std::string out, err;
        x.error = make_fixture_once(x.dir, fixture_key({reap_bin(), source_dir() + "/tools/make_gen_tasks.py"}), [&]() -> std::string {
        if (!corpus_subset("calib", calib, {}, 3000, err)) return err;
        for (const std::string & s : {
                 python() + " " + shell_quote(source_dir() + "/tools/make_gen_tasks.py") + " --heldout " +
                     shell_quote(source_dir() + "/data/corpus/heldout.jsonl") + " --out " + shell_quote(x.dir),
                 reap + " calibrate -m " + shell_quote(x.chat) + " --corpus " + shell_quote(calib) + " -o " + shell_quote(sal) +
                     " -c 256 -np 1 -t 1 --force --no-progress",
                 reap + " plan " + shell_quote(sal) + " -m " + shell_quote(x.chat) + " --ratio 0.5 --force -o " + shell_quote(x.plan50),
                 reap + " prune -m " + shell_quote(x.chat) + " --plan " + shell_quote(x.plan50) + " --force -o " + shell_quote(x.pruned50)}) {
            if (run_cmd(s, out) != 0) return s + ":\n" + out;
        }
        return "";
        });
        return x;
    }();
    return g;
}

} // namespace

size_t finished_of(const nlohmann::json & doc) {
    size_t n = 0;
    for (const auto & a : doc["answers"]) n += a.contains("recheck") && !a["recheck"]["hit_cap"].get<bool>();
    return n;
}

// Greedy answers of a mask equal its file's, task for task; a cap hit is an
// answer of exactly its cap's tokens without an end; the recheck runs exactly
// those again, its greedy answer begins with the capped one (the same first
// tokens), and the ones it reports finished wrote fewer tokens than its cap.
// The answers files written for the judge read back with the same numbers.
TEST(Tasks, GenerativeMaskEqualsItsFileAndTheCapRecheckCountsWhatFinished) {
    const gen_fixture & g = gen();
    ASSERT_TRUE(g.error.empty()) << g.error;
    const std::string dir = g.dir + "/answers", json = g.dir + "/gen.json";
    std::string out;
    ASSERT_EQ(run_cmd("rm -rf " + shell_quote(dir), out), 0);
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(g.chat) + " -p " + shell_quote(g.pruned50) + " --mask " +
                      shell_quote(g.plan50) + " --tasks " + shell_quote(g.chat_tasks) + " --recheck-cap 96 --answers-dir " +
                      shell_quote(dir) + " -t 1 -q --json > " + shell_quote(json), out), 0) << out;
    const nlohmann::json j = nlohmann::json::parse(slurp(json));
    ASSERT_EQ(j["generate"].size(), 3u);
    const auto & file = j["generate"][1], & mask = j["generate"][2];
    ASSERT_TRUE(mask["model"]["masked"].get<bool>());
    ASSERT_EQ(file["answers"].size(), mask["answers"].size());
    for (size_t i = 0; i < file["answers"].size(); ++i) {
        EXPECT_EQ(file["answers"][i]["text"], mask["answers"][i]["text"]) << "task " << i;
        EXPECT_EQ(file["answers"][i]["pass"], mask["answers"][i]["pass"]) << "task " << i;
    }
    size_t hits = 0, finished = 0;
    for (const auto & m : j["generate"]) {
        for (const auto & a : m["answers"]) {
            const bool hit = a["hit_cap"];
            EXPECT_EQ(hit, a["n_tokens"].get<int>() == 24 && a["cap"].get<int>() == 24) << a;
            EXPECT_EQ(a.contains("recheck"), hit) << "exactly the answers that hit the cap are rechecked";
            if (!hit) continue;
            ++hits;
            const std::string first = a["text"], again = a["recheck"]["text"];
            EXPECT_EQ(again.substr(0, first.size()), first) << "greedy: the recheck begins with the capped answer";
            if (!a["recheck"]["hit_cap"].get<bool>()) {
                ++finished;
                EXPECT_LT(a["recheck"]["n_tokens"].get<int>(), 96);
            }
        }
    }
    EXPECT_GT(hits, 0u) << "the chat tasks' cap of 24 should stop some answers";
    EXPECT_GT(finished, 0u) << "and the recheck at 96 should let some finish";
    for (const char * name : {"base.answers.json", "1-pruned50.gguf.answers.json", "2-plan50.json.answers.json"}) {
        EXPECT_TRUE(file_exists(dir + "/" + name)) << name;
    }
    EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/1-pruned50.gguf.answers.json"))["summary"], file["summary"]);
    // the card: the pruned file's row under Verified (its files' hashes), the mask's as an estimate
    const std::string card = g.dir + "/gen-card";
    ASSERT_EQ(run_cmd("rm -rf " + shell_quote(card), out), 0);
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " report -m " + shell_quote(g.chat) + " --plan " + shell_quote(g.plan50) + " " +
                      shell_quote(g.pruned50) + " --tasks " + shell_quote(json) + " -o " + shell_quote(card), out), 0) << out;
    const std::string md = slurp(card + "/README.md");
    char rate[64];
    snprintf(rate, sizeof rate, "**pass rate %.1f%%**", 100.0 * file["summary"]["pass"].get<double>() / file["answers"].size());
    EXPECT_NE(md.find("**Generative tasks `gen.json`**: measured on this build's files"), std::string::npos) << md;
    EXPECT_NE(md.find(rate), std::string::npos) << rate;
    EXPECT_NE(md.find("rechecked at 96 tokens: " + std::to_string(finished_of(file)) + " then finished"), std::string::npos) << md;
    // the same run on the recall model: exact answers, its needle form
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(g.recall) + " --tasks " + shell_quote(g.recall_tasks) +
                      " -t 1 -q", out), 0) << out;
    EXPECT_NE(out.find("base "), std::string::npos) << out;
}

TEST(Tasks, BadGenerativeTasksAreRefusedBeforeADecodeAndWriteNothing) {
    const gen_fixture & g = gen();
    ASSERT_TRUE(g.error.empty()) << g.error;
    const std::string d = g.dir + "/bad", answers = d + "/answers";
    ::mkdir(d.c_str(), 0755);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"{\"id\":\"a\",\"prompt\":\"x\",\"answer\":{\"regex\":\"(\"}}", "does not compile"},
        {"{\"id\":\"a\",\"prompt\":\"x\",\"answer\":{}}", "\"answer\" must be one of"},
        {"{\"id\":\"a\",\"prompt\":\"x\",\"messages\":[],\"answer\":{\"exact\":\"y\"}}", "exactly one of"},
        {"{\"id\":\"a\",\"prompt\":\"x\",\"answer\":{\"exact\":\"y\"}}\n{\"id\":\"a\",\"prompt\":\"x\",\"answer\":{\"exact\":\"y\"}}", "given twice"},
        {"{\"id\":\"a\",\"prompt\":\"x\",\"answer\":{\"exact\":\"y\"},\"max_tokens\":0}", "max_tokens"},
        {"{\"id\":\"a\",\"prompt\":\"x\",\"answer\":{\"number\":1}}", "\"answer\" must be one of"},
    };
    for (const auto & [line, msg] : cases) {
        std::ofstream(d + "/t.jsonl") << line << "\n";
        std::string out;
        EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(g.chat) + " --tasks " + shell_quote(d + "/t.jsonl") +
                          " --answers-dir " + shell_quote(answers) + " -t 1 -q", out), 2) << line;
        EXPECT_NE(out.find(msg), std::string::npos) << line << ": " << out;
        EXPECT_FALSE(file_exists(answers)) << "an answers folder after a refusal";
    }
    // messages on a model without a chat template (reap-moe-recall has none)
    std::ofstream(d + "/m.jsonl") << "{\"id\":\"m1\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"answer\":{\"exact\":\"y\"}}\n";
    std::string out;
    EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(g.recall) + " --tasks " + shell_quote(d + "/m.jsonl") + " -t 1 -q", out), 2);
    EXPECT_NE(out.find("task 'm1' (line 1)"), std::string::npos) << out;
}

// reap judge on the answers of reap-moe-chat and its 50% cut, with reap-moe-chat
// as the judge (about the mechanics, not quality): two identical files give
// only ties; swapping A and B mirrors wins and losses exactly and keeps the
// position rate; a judge whose every verdict is one position (this one: its
// position rate is 0 or 1) gives only ties; the request log holds every
// prompt, and each reply is the label with the highest logit it logged;
// mismatched inputs are refused with exit 2 and nothing written.
TEST(Judge, SwappedOrderMirrorsIdenticalFilesTieAndBadInputsAreRefused) {
    const gen_fixture & g = gen();
    ASSERT_TRUE(g.error.empty()) << g.error;
    const std::string dir = g.dir + "/judge", ans = dir + "/answers", reap = shell_quote(reap_bin());
    std::string out;
    ASSERT_EQ(run_cmd("rm -rf " + shell_quote(dir) + " && mkdir -p " + shell_quote(dir), out), 0);
    ASSERT_EQ(run_cmd(reap + " eval -m " + shell_quote(g.chat) + " -p " + shell_quote(g.pruned50) + " --tasks " + shell_quote(g.chat_tasks) +
                      " --answers-dir " + shell_quote(ans) + " -t 1 -q", out), 0) << out;
    const std::string a = ans + "/base.answers.json", b = ans + "/1-pruned50.gguf.answers.json";
    std::ofstream(dir + "/rubric.json") << "{\"scale\": [1, 5], \"instructions\": \"Score the continuation.\"}\n";
    auto judge = [&](const std::string & x, const std::string & y, const std::string & o, const std::string & more = "") {
        std::string log;
        const int rc = run_cmd(reap + " judge " + shell_quote(x) + " " + shell_quote(y) + " --judge " + shell_quote(g.chat) + " -o " +
                               shell_quote(dir + "/" + o) + more + " -t 1 -q", log);
        EXPECT_EQ(rc, 0) << log;
        return rc == 0 ? nlohmann::json::parse(slurp(dir + "/" + o)) : nlohmann::json();
    };
    const nlohmann::json ab = judge(a, b, "ab.json", " --rubric " + shell_quote(dir + "/rubric.json")), ba = judge(b, a, "ba.json"),
                         same = judge(a, a, "same.json");
    ASSERT_TRUE(ab.is_object() && ba.is_object() && same.is_object());
    EXPECT_EQ(same["summary"]["wins"], 0);
    EXPECT_EQ(same["summary"]["losses"], 0);
    EXPECT_EQ(same["summary"]["ties"], same["summary"]["judged"]);
    EXPECT_EQ(ab["summary"]["wins"], ba["summary"]["losses"]);
    EXPECT_EQ(ab["summary"]["losses"], ba["summary"]["wins"]);
    EXPECT_EQ(ab["summary"]["ties"], ba["summary"]["ties"]);
    EXPECT_DOUBLE_EQ(ab["summary"]["position_first_rate"].get<double>(), ba["summary"]["position_first_rate"].get<double>());
    const double rate = ab["summary"]["position_first_rate"];
    if (rate == 0.0 || rate == 1.0) EXPECT_EQ(ab["summary"]["ties"], ab["summary"]["judged"]) << "a one-position judge gives only ties";
    EXPECT_EQ(ab["summary"]["judged"].get<size_t>(), 20u);
    ASSERT_TRUE(ab["summary"].contains("rubric_a"));
    EXPECT_EQ(ab["summary"]["rubric_a"]["n"], 20);
    // the request log: a line per prompt, each reply the label of the highest logit
    std::istringstream log(slurp(dir + "/ab.requests.jsonl"));
    size_t lines = 0;
    std::string header;
    std::getline(log, header);   // the run it belongs to
    EXPECT_NE(header.find("reap-judge-log"), std::string::npos) << header;
    for (std::string line; std::getline(log, line); ++lines) {
        const nlohmann::json q = nlohmann::json::parse(line);
        std::string best;
        double top = -INFINITY;
        for (const auto & [label, v] : q["detail"].items()) {
            if (v.get<double>() > top) top = v.get<double>(), best = label;
        }
        EXPECT_EQ(q["reply"], best) << line;
        const bool pairwise = q["kind"] == "ab" || q["kind"] == "ba";
        EXPECT_EQ(q["prompt"].get<std::string>().find("First answer: ") != std::string::npos, pairwise) << line;
    }
    EXPECT_EQ(lines, 80u) << "20 pairs x (two orders + two rubric scores)";
    // the card: the comparison under Not verified, with its counts, position rate, rubric and scope
    const std::string card = dir + "/card";
    ASSERT_EQ(run_cmd(reap + " report -m " + shell_quote(g.chat) + " --plan " + shell_quote(g.plan50) + " " + shell_quote(g.pruned50) +
                      " --judge " + shell_quote(dir + "/ab.json") + " -o " + shell_quote(card), out), 0) << out;
    const std::string md = slurp(card + "/README.md");
    const std::string counts = "A " + std::to_string(ab["summary"]["wins"].get<int>()) + " wins, " +
                               std::to_string(ab["summary"]["losses"].get<int>()) + " losses, " +
                               std::to_string(ab["summary"]["ties"].get<int>()) + " ties of 20 pairs";
    EXPECT_NE(md.find("**Pairwise judge `ab.json`**"), std::string::npos) << md;
    EXPECT_NE(md.find(counts), std::string::npos) << counts;
    EXPECT_NE(md.find("These numbers compare these two builds under this judge only."), std::string::npos);
    EXPECT_NE(md.find("rubric `rubric.json`"), std::string::npos);
    // refused: other tasks, a missing task, another format version, a rubric without a scale; nothing written
    nlohmann::json other = nlohmann::json::parse(slurp(b));
    other["tasks"]["sha256"] = std::string(64, '0');
    std::ofstream(dir + "/other.json") << other.dump();
    nlohmann::json missing = nlohmann::json::parse(slurp(b));
    missing["answers"].erase(missing["answers"].size() - 1);
    int n_pass = 0, n_cap = 0, n_fin = 0;   // a summary that holds for what is left
    for (const auto & x : missing["answers"]) {
        n_pass += x["pass"].get<bool>(), n_cap += x["hit_cap"].get<bool>();
        n_fin += x.contains("recheck") && !x["recheck"]["hit_cap"].get<bool>();
    }
    missing["summary"] = {{"answers", missing["answers"].size()}, {"pass", n_pass}, {"cap_hits", n_cap}, {"rechecked_finished", n_fin}};
    std::ofstream(dir + "/missing.json") << missing.dump();
    nlohmann::json v2 = nlohmann::json::parse(slurp(b));
    v2["version"] = 2;
    std::ofstream(dir + "/v2.json") << v2.dump();
    std::ofstream(dir + "/noscale.json") << "{\"instructions\": \"x\"}\n";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {shell_quote(a) + " " + shell_quote(dir + "/other.json"), "not the same tasks"},
        {shell_quote(a) + " " + shell_quote(dir + "/missing.json"), "is missing from"},
        {shell_quote(a) + " " + shell_quote(dir + "/v2.json"), "version"},
        {shell_quote(a) + " " + shell_quote(b) + " --rubric " + shell_quote(dir + "/noscale.json"), "has no \"scale\""},
        {shell_quote(a) + " " + shell_quote(b) + " --samples 2", "--samples 2: the answers files hold 1 and 1 answers a task"},
    };
    for (const auto & [args, msg] : cases) {
        EXPECT_EQ(run_cmd(reap + " judge " + args + " --judge " + shell_quote(g.chat) + " -o " + shell_quote(dir + "/bad.json") + " -t 1 -q", out), 2) << args;
        EXPECT_NE(out.find(msg), std::string::npos) << args << ": " << out;
        EXPECT_FALSE(file_exists(dir + "/bad.json"));
        EXPECT_FALSE(file_exists(dir + "/bad.requests.jsonl"));
    }
}

// The card: reap report --tasks counts a task file that measured this build
// (its files' hashes: Verified; the plan's mask: a masked estimate), with the
// accuracy, interval, flips and p-value the file holds, and drops the line
// that says task accuracy is not measured; a task file of another build is
// not counted.
TEST(Tasks, TheCardShowsTaskAccuracyFromFilesThatMeasuredThisBuild) {
    const task_fixture & f = fixture();
    ASSERT_TRUE(f.error.empty()) << f.error;
    std::string out;
    const nlohmann::json j = eval_json("-p " + shell_quote(f.pruned50) + " --mask " + shell_quote(f.plan50) + " --multiple-choice " +
                                       shell_quote(f.choice), out);
    ASSERT_TRUE(j.is_object()) << out;
    const std::string tasks = f.dir + "/card-tasks.json", card = f.dir + "/card";
    std::ofstream(tasks) << j.dump();
    ASSERT_EQ(run_cmd("rm -rf " + shell_quote(card), out), 0);
    const std::string reap = shell_quote(reap_bin());
    ASSERT_EQ(run_cmd(reap + " report -m " + shell_quote(f.model) + " --plan " + shell_quote(f.plan50) + " " + shell_quote(f.pruned50) +
                      " --tasks " + shell_quote(tasks) + " -o " + shell_quote(card), out), 0) << out;
    const std::string md = slurp(card + "/README.md");
    const auto & m = j["choice"]["models"];
    char acc[32];
    snprintf(acc, sizeof acc, "**accuracy %.2f%%**", 100 * m[1]["accuracy"].get<double>());
    EXPECT_NE(md.find("**Tasks `card-tasks.json`**: measured on this build's files"), std::string::npos) << md;
    EXPECT_NE(md.find(acc), std::string::npos) << acc;
    EXPECT_NE(md.find(std::to_string(m[1]["paired"]["right_to_wrong"].get<int>()) + " right -> wrong"), std::string::npos);
    EXPECT_NE(md.find("a masked estimate"), std::string::npos) << "the mask's row is an estimate, not the build";
    EXPECT_EQ(md.find("Task accuracy (benchmarks)"), std::string::npos) << "the card still says tasks were not measured";
    // a task file whose candidate is another build is not counted
    nlohmann::json other = j;
    other["choice"]["models"].erase(1);
    other["choice"]["models"].erase(1);
    other["choice"]["measured"]["candidates"] = nlohmann::json::array();
    std::ofstream(f.dir + "/card-other.json") << other.dump();
    ASSERT_EQ(run_cmd(reap + " report -m " + shell_quote(f.model) + " --plan " + shell_quote(f.plan50) + " " + shell_quote(f.pruned50) +
                      " --tasks " + shell_quote(f.dir + "/card-other.json") + " --force -o " + shell_quote(card), out), 0) << out;
    EXPECT_NE(slurp(card + "/README.md").find("is not counted"), std::string::npos);
}

// reap sweep --multiple-choice scores every size by mask in the same run: its
// "keep 16" (the 50% cut of 32 experts) picks what reap eval --mask of the same
// plan picks, task for task, and the file reads back (reap report --sweep).
TEST(Tasks, SweepScoresEverySizeAsEvalScoresItsMask) {
    const task_fixture & f = fixture();
    ASSERT_TRUE(f.error.empty()) << f.error;
    const std::string sw = f.dir + "/sweep.json", plans = f.dir + "/sweep-plans", reap = shell_quote(reap_bin());
    std::string out, err;
    const std::string heldout = f.dir + "/heldout.jsonl";
    ASSERT_TRUE(corpus_subset("heldout", heldout, {"en"}, 1500, err)) << err;
    ASSERT_EQ(run_cmd(reap + " sweep " + shell_quote(f.dir + "/saliency.gguf") + " -m " + shell_quote(f.model) + " -f " + shell_quote(heldout) +
                      " --keep 24,16 --multiple-choice " + shell_quote(f.choice) + " --plans-dir " + shell_quote(plans) + " --force -o " +
                      shell_quote(sw) + k_rt + " -q", out), 0) << out;
    EXPECT_NE(out.find("masked by keep 16"), std::string::npos) << out;
    const nlohmann::json s = nlohmann::json::parse(slurp(sw));
    ASSERT_TRUE(s.contains("choice"));
    const auto & models = s["choice"]["models"];
    ASSERT_EQ(models.size(), 3u);
    const nlohmann::json e = eval_json("--mask " + shell_quote(plans + "/keep-16.json") + " --multiple-choice " + shell_quote(f.choice), out);
    ASSERT_TRUE(e.is_object()) << out;
    for (const auto & m : models) {
        if (m["name"] == "keep 16") EXPECT_EQ(m["picked"], e["choice"]["models"][1]["picked"]);
        if (m["name"] == "base") EXPECT_EQ(m["correct"], e["choice"]["models"][0]["correct"]);
    }
    // a tampered count in the sweep's task section is refused where the sweep is read
    nlohmann::json bad = s;
    bad["choice"]["models"][1]["n_correct"] = bad["choice"]["models"][1]["n_correct"].get<int>() + 1;
    std::ofstream(f.dir + "/sweep-bad.json") << bad.dump();
    EXPECT_EQ(run_cmd(reap + " report -m " + shell_quote(f.model) + " --plan " + shell_quote(f.plan50) + " " + shell_quote(f.pruned50) +
                      " --sweep " + shell_quote(f.dir + "/sweep-bad.json") + " --force -o " + shell_quote(f.dir + "/card-sweep"), out), 2) << out;
    EXPECT_NE(out.find("n_correct"), std::string::npos) << out;
}

// reap fit's task gate: each gated candidate's accuracy is what reap eval
// --mask --multiple-choice measures on its plan (planned here with reap plan),
// the reference's is the base's, each verdict follows the rule computed here
// (not more than --task-slack below the reference, and not worse by McNemar's
// test at 5%), the winner is the first in KLD order that passed, and the card
// shows the task column.
TEST(Tasks, FitsTaskGateRecordsWhatEvalMeasures) {
    const task_fixture & f = fixture();
    ASSERT_TRUE(f.error.empty()) << f.error;
    const std::string dir = f.dir + "/fit-gate", text = f.dir + "/heldout.txt", reap = shell_quote(reap_bin());
    std::string out, err;
    ASSERT_TRUE(heldout_text(text, 1200, err)) << err;
    ASSERT_EQ(run_cmd("rm -rf " + shell_quote(dir), out), 0);
    const double slack = 0.0;
    ASSERT_EQ(run_cmd(reap + " fit -m " + shell_quote(f.model) + " --corpus " + shell_quote(f.dir + "/calib.jsonl") + " -f " +
                      shell_quote(text) + " --budget 25MB -o " + shell_quote(dir) + " --multiple-choice " + shell_quote(f.choice) +
                      " --task-slack 0 --gate-top 2" + k_rt + " -q", out), 0) << out;
    const nlohmann::json fit = nlohmann::json::parse(slurp(dir + "/fit.json"));
    ASSERT_TRUE(fit.contains("gates")) << fit.dump(1);
    const auto & gates = fit["gates"];
    std::string masks;
    std::vector<std::string> plans;
    for (const auto & v : gates["verdicts"]) {
        const auto & c = fit["candidates"][v["candidate"].get<size_t>()];
        plans.push_back(dir + "/gated-" + std::to_string(plans.size()) + ".json");
        ASSERT_EQ(run_cmd(reap + " plan " + shell_quote(dir + "/saliency.gguf") + " -m " + shell_quote(f.model) + " --width " +
                          std::to_string(c["width"].get<int64_t>()) + " --keep " + std::to_string(c["n_keep"].get<int64_t>()) + " -o " +
                          shell_quote(plans.back()), out), 0) << out;
        masks += " --mask " + shell_quote(plans.back());
    }
    const nlohmann::json e = eval_json(masks.substr(1) + " --multiple-choice " + shell_quote(f.choice), out);
    ASSERT_TRUE(e.is_object()) << out;
    const auto & models = e["choice"]["models"];
    const double ref = models[0]["accuracy"];
    EXPECT_NEAR(gates["reference"]["task_accuracy"].get<double>(), ref, 1e-12);
    bool seen_pass = false;
    for (size_t i = 0; i < plans.size(); ++i) {
        const auto & v = gates["verdicts"][i];
        const auto & m = models[i + 1];
        EXPECT_EQ(v["task_correct"], m["correct"]) << plans[i];
        const bool pass = m["accuracy"].get<double>() >= ref - slack - 1e-12 &&
                          !(m["paired"]["p_value"].get<double>() < 0.05 &&
                            m["paired"]["right_to_wrong"].get<int>() > m["paired"]["wrong_to_right"].get<int>());
        EXPECT_EQ(v["passed"].get<bool>(), pass) << plans[i];
        if (pass && !seen_pass) {
            EXPECT_EQ(fit["winner"], v["candidate"]) << "the winner is the first that passed";
            seen_pass = true;
        }
    }
    ASSERT_TRUE(seen_pass);
    const std::string card = slurp(dir + "/card/README.md");
    EXPECT_NE(card.find("task accuracy (95%)"), std::string::npos);
    EXPECT_NE(card.find("passed (winner)"), std::string::npos);
}

namespace {

// A TCP port free on 127.0.0.1 now (bound to 0, read back, closed).
int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (::bind(fd, (sockaddr *) &a, sizeof a) == 0 && ::getsockname(fd, (sockaddr *) &a, &len) == 0) port = ntohs(a.sin_port);
    ::close(fd);
    return port;
}

// Whether 127.0.0.1:port accepts a connection within `seconds`.
bool wait_port(int port, int seconds) {
    for (int i = 0; i < seconds * 10; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t) port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        const bool ok = ::connect(fd, (sockaddr *) &a, sizeof a) == 0;
        ::close(fd);
        if (ok) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

// A background process (sh -c CMD), stopped when the holder goes.
struct background {
    pid_t pid = -1;
    explicit background(const std::string & cmd) {
        pid = ::fork();
        if (pid == 0) {
            ::setpgid(0, 0);
            ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), (char *) nullptr);
            ::_exit(127);
        }
    }
    ~background() {
        if (pid > 0) {
            ::kill(pid, SIGTERM);
            ::waitpid(pid, nullptr, 0);
        }
    }
};

size_t lines_of(const std::string & path) {
    std::istringstream in(slurp(path));
    size_t n = 0;
    for (std::string l; std::getline(in, l);) ++n;
    return n;
}

} // namespace

// The endpoint path: against the pinned llama-server started here on
// 127.0.0.1 with the same judge model, the verdicts equal the in-process
// ones pair for pair. Against a server that answers 500, or text that is not a
// verdict, or stops after a few replies: the failures are counted and named,
// exit 2, no JUDGE.json; the run resumes from its request log, asking only
// what has no verdict. An unreachable URL is refused before anything is written.
TEST(Judge, TheEndpointGivesTheInProcessVerdictsAndFailuresAreCountedAndResumed) {
    const gen_fixture & g = gen();
    ASSERT_TRUE(g.error.empty()) << g.error;
    const std::string dir = g.dir + "/judge-url", ans = dir + "/answers", reap = shell_quote(reap_bin());
    std::string out;
    ASSERT_EQ(run_cmd("rm -rf " + shell_quote(dir) + " && mkdir -p " + shell_quote(dir), out), 0);
    ASSERT_EQ(run_cmd(reap + " eval -m " + shell_quote(g.chat) + " -p " + shell_quote(g.pruned50) + " --tasks " + shell_quote(g.chat_tasks) +
                      " --answers-dir " + shell_quote(ans) + " -t 1 -q", out), 0) << out;
    const std::string a = shell_quote(ans + "/base.answers.json"), b = shell_quote(ans + "/1-pruned50.gguf.answers.json");
    ASSERT_EQ(run_cmd(reap + " judge " + a + " " + b + " --judge " + shell_quote(g.chat) + " -o " + shell_quote(dir + "/local.json") +
                      " -t 1 -q", out), 0) << out;
    const nlohmann::json local = nlohmann::json::parse(slurp(dir + "/local.json"));

    // the pinned llama-server, the same model, one slot, no prompt cache reuse across requests
    {
        const int port = free_port();
        ASSERT_GT(port, 0);
        background server(shell_quote(llama_bin_dir() + "/llama-server") + " -m " + shell_quote(g.chat) + " --host 127.0.0.1 --port " +
                          std::to_string(port) + " -c 512 -np 1 -t 1 > " + shell_quote(dir + "/server.log") + " 2>&1");
        ASSERT_TRUE(wait_port(port, 120)) << slurp(dir + "/server.log");
        const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
        int rc = 1;
        for (int i = 0; i < 60 && rc != 0; ++i) {   // the port opens before the model is loaded (503 until then)
            rc = run_cmd(reap + " judge " + a + " " + b + " --judge-url " + url + " --retries 0 -o " + shell_quote(dir + "/url.json") +
                         " --force -q", out);
            if (rc != 0) std::this_thread::sleep_for(std::chrono::seconds(1));
        }
        ASSERT_EQ(rc, 0) << out << slurp(dir + "/server.log").substr(0, 4000);
    }
    const nlohmann::json url = nlohmann::json::parse(slurp(dir + "/url.json"));
    ASSERT_EQ(url["pairs"].size(), local["pairs"].size());
    for (size_t i = 0; i < url["pairs"].size(); ++i) {
        EXPECT_EQ(url["pairs"][i]["ab"], local["pairs"][i]["ab"]) << "pair " << i;
        EXPECT_EQ(url["pairs"][i]["ba"], local["pairs"][i]["ba"]) << "pair " << i;
    }
    EXPECT_EQ(url["judge"]["kind"], "url");

    // failures: counted, named, no JUDGE.json, resumable
    const std::string fake = python() + " " + shell_quote(source_dir() + "/tests/fixtures/fake_judge_server.py");
    auto judge_on = [&](int port, const std::string & o) {
        return run_cmd(reap + " judge " + a + " " + b + " --judge-url http://127.0.0.1:" + std::to_string(port) + "/v1 --retries 1 --timeout 5 -o " +
                       shell_quote(dir + "/" + o) + " -q", out);
    };
    for (const auto & [mode, msg] : std::vector<std::pair<std::string, std::string>>{{"500", "HTTP 500"}, {"text", "not a verdict: 'maybe'"}}) {
        const int port = free_port();
        background s(fake + " " + std::to_string(port) + " " + mode + " " + shell_quote(dir + "/count-" + mode));
        ASSERT_TRUE(wait_port(port, 30));
        EXPECT_EQ(judge_on(port, mode + ".json"), 2) << out;
        EXPECT_NE(out.find("40 of 40 requests got no verdict"), std::string::npos) << out;
        EXPECT_NE(out.find(msg), std::string::npos) << out;
        EXPECT_FALSE(file_exists(dir + "/" + mode + ".json"));
    }
    const int p1 = free_port();
    {
        background s(fake + " " + std::to_string(p1) + " verdict 15 " + shell_quote(dir + "/count-stop"));
        ASSERT_TRUE(wait_port(p1, 30));
        EXPECT_EQ(judge_on(p1, "stop.json"), 2) << out;
        EXPECT_NE(out.find("25 of 40 requests got no verdict"), std::string::npos) << out;
        EXPECT_NE(out.find("run the same command again"), std::string::npos) << out;
        EXPECT_FALSE(file_exists(dir + "/stop.json"));
    }
    {
        background s(fake + " " + std::to_string(p1) + " verdict 0 " + shell_quote(dir + "/count-resume"));
        ASSERT_TRUE(wait_port(p1, 30));
        EXPECT_EQ(judge_on(p1, "stop.json"), 0) << out;
        EXPECT_EQ(lines_of(dir + "/count-resume"), 25u) << "only the requests without a verdict are asked again";
        const nlohmann::json done = nlohmann::json::parse(slurp(dir + "/stop.json"));
        EXPECT_EQ(done["summary"]["ties"], 20) << "a judge that always says first ties every pair";
        EXPECT_DOUBLE_EQ(done["summary"]["position_first_rate"].get<double>(), 1.0);
        EXPECT_EQ(done["judge"]["name"], "fake-judge");
    }
    EXPECT_EQ(run_cmd(reap + " judge " + a + " " + b + " --judge-url http://127.0.0.1:" + std::to_string(free_port()) +
                      "/v1 -o " + shell_quote(dir + "/none.json") + " -q", out), 2) << out;
    EXPECT_NE(out.find("cannot reach the endpoint"), std::string::npos) << out;
    EXPECT_FALSE(file_exists(dir + "/none.json"));
    EXPECT_FALSE(file_exists(dir + "/none.requests.jsonl"));
}
