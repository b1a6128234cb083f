// Multiple-choice task files and the model-free half of llama-perplexity's
// scoring rule (choice_tasks.h).
#include "metrics/choice_tasks.h"

#include "util/file.h"

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include <sys/stat.h>

namespace reap {

const char * choice_format_name(choice_format f) {
    switch (f) {
        case choice_format::multiple_choice: return "multiple-choice";
        case choice_format::hellaswag:       return "hellaswag";
        case choice_format::winogrande:      return "winogrande";
    }
    return "?";
}

const char * choice_format_flag(choice_format f) {
    switch (f) {
        case choice_format::multiple_choice: return "--multiple-choice";
        case choice_format::hellaswag:       return "--hellaswag";
        case choice_format::winogrande:      return "--winogrande";
    }
    return "?";
}

namespace {

constexpr uint64_t k_max_task_file = 1ull << 30;
constexpr uint32_t k_max_answers = 100;   // llama-perplexity's bound on one answer set

// A bounds-checked little-endian reader over the file's bytes.
struct byte_reader {
    const std::string & b;
    size_t              at = 0;

    bool u32(uint32_t & v) {
        if (b.size() - at < 4) return false;
        const auto * p = (const unsigned char *) b.data() + at;
        v = (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
        at += 4;
        return true;
    }
    bool str(std::string & s) {
        uint32_t n = 0;
        if (!u32(n) || b.size() - at < n) return false;
        s.assign(b, at, n);
        at += n;
        return true;
    }
};

struct answer_set {
    std::vector<std::string> answers;
    std::vector<int32_t>     labels;
};

// One answer set; `what` names it ("task 3 (at byte 120): mc1").
bool read_answer_set(byte_reader & r, const std::string & what, answer_set & a, std::string & err) {
    uint32_t n = 0;
    if (!r.u32(n)) {
        err = what + ": the file ends inside its answer count";
        return false;
    }
    if (n > k_max_answers) {
        err = what + ": " + std::to_string(n) + " answers (at most " + std::to_string(k_max_answers) + ")";
        return false;
    }
    a.answers.resize(n);
    a.labels.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
        if (!r.str(a.answers[i])) {
            err = what + ": the file ends inside answer " + std::to_string(i);
            return false;
        }
    }
    for (uint32_t i = 0; i < n; ++i) {
        uint32_t v = 0;
        if (!r.u32(v)) {
            err = what + ": the file ends inside its labels";
            return false;
        }
        a.labels[i] = (int32_t) v;
    }
    return true;
}

bool parse_binary(const std::string & bytes, const std::string & name, choice_set & out, std::string & err) {
    byte_reader r{bytes};
    uint32_t n_task = 0;
    if (!r.u32(n_task) || n_task == 0) {
        err = name + ": no tasks (the first 4 bytes are the task count)";
        return false;
    }
    // each task takes at least 4 (offset) + 4 (question) + 4 + 4 (answer counts) bytes
    if ((uint64_t) n_task * 16 > bytes.size()) {
        err = name + ": says it holds " + std::to_string(n_task) + " tasks, more than its " + std::to_string(bytes.size()) +
              " bytes can";
        return false;
    }
    std::vector<uint32_t> offsets(n_task);
    for (auto & o : offsets) r.u32(o);
    out.tasks.resize(n_task);
    for (uint32_t t = 0; t < n_task; ++t) {
        const std::string what = name + ": task " + std::to_string(t) + " (at byte " + std::to_string(r.at) + ")";
        if (offsets[t] != r.at) {
            err = what + ": the offset table says it starts at byte " + std::to_string(offsets[t]);
            return false;
        }
        std::string question;
        answer_set mc1, mc2;
        if (!r.str(question)) {
            err = what + ": the file ends inside its question";
            return false;
        }
        if (!read_answer_set(r, what + ": mc1", mc1, err) || !read_answer_set(r, what + ": mc2", mc2, err)) return false;
        if (question.empty()) {
            err = what + ": empty question";
            return false;
        }
        if (mc1.answers.size() < 2) {
            err = what + ": " + std::to_string(mc1.answers.size()) + " answers (a choice needs at least 2)";
            return false;
        }
        choice_task & task = out.tasks[t];
        task.index = t;
        bool any = false;
        for (size_t s = 0; s < mc1.answers.size(); ++s) {
            if (mc1.answers[s].empty()) {
                err = what + ": answer " + std::to_string(s) + " is empty";
                return false;
            }
            if (mc1.labels[s] != 0 && mc1.labels[s] != 1) {
                err = what + ": label " + std::to_string(mc1.labels[s]) + " of answer " + std::to_string(s) + " is not 0 or 1";
                return false;
            }
            any = any || mc1.labels[s] == 1;
            task.texts.push_back(question + " " + mc1.answers[s]);
            task.correct.push_back((uint8_t) mc1.labels[s]);
        }
        if (!any) {
            err = what + ": no answer is labelled correct";
            return false;
        }
    }
    if (r.at != bytes.size()) {
        err = name + ": " + std::to_string(bytes.size() - r.at) + " bytes after the last task";
        return false;
    }
    return true;
}

// The file as llama-perplexity's -f gives it: one trailing newline removed.
std::vector<std::string> text_lines(const std::string & bytes) {
    std::string text = bytes;
    if (!text.empty() && text.back() == '\n') text.pop_back();
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

bool parse_hellaswag(const std::string & bytes, const std::string & name, choice_set & out, std::string & err) {
    const std::vector<std::string> lines = text_lines(bytes);
    if (lines.empty() || lines.size() % 6 != 0) {
        err = name + ": " + std::to_string(lines.size()) + " lines, not a positive multiple of 6 (a task is 6 lines)";
        return false;
    }
    for (size_t t = 0; t < lines.size() / 6; ++t) {
        const std::string what = name + ": task " + std::to_string(t) + " (line " + std::to_string(6 * t + 1) + ")";
        const std::string & gold = lines[6 * t + 1];
        if (gold.size() != 1 || gold[0] < '0' || gold[0] > '3') {
            err = what + ": the gold ending's index is '" + gold + "', not 0..3";
            return false;
        }
        choice_task task;
        task.index = (uint32_t) t;
        for (size_t s = 0; s < 4; ++s) {
            task.texts.push_back(lines[6 * t] + " " + lines[6 * t + 2 + s]);
            task.correct.push_back(s == (size_t) (gold[0] - '0'));
        }
        out.tasks.push_back(std::move(task));
    }
    return true;
}

// One Winogrande line split at its first four unquoted commas, as llama.cpp
// splits it; false when it has fewer.
bool split_winogrande(const std::string & line, size_t comma[4]) {
    int n = 0;
    bool quoted = false;
    for (size_t i = 0; i < line.size() && n < 4; ++i) {
        if (line[i] == '"') quoted = !quoted;
        else if (line[i] == ',' && !quoted) comma[n++] = i;
    }
    return n == 4;
}

bool parse_winogrande(const std::string & bytes, const std::string & name, choice_set & out, std::string & err) {
    std::string text = bytes;
    if (!text.empty() && text.back() == '\n') text.pop_back();
    // llama-perplexity stops at the line the text ends in (no newline after it)
    out.winogrande_last_line_dropped = !text.empty() && text.back() != '\n';
    std::vector<std::string> lines = text_lines(bytes);
    while (!lines.empty() && lines.back().empty()) lines.pop_back();
    for (size_t l = 0; l < lines.size(); ++l) {
        const std::string & line = lines[l];
        const std::string what = name + ": line " + std::to_string(l + 1);
        size_t c[4];
        if (!split_winogrande(line, c)) {
            err = what + ": not 5 comma-separated fields (index,sentence,choice1,choice2,answer)";
            return false;
        }
        const bool quoted = line[c[0] + 1] == '"';
        if (quoted && (c[1] < c[0] + 3 || line[c[1] - 1] != '"')) {
            err = what + ": the quoted sentence is not closed before its comma";
            return false;
        }
        const std::string sentence = quoted ? line.substr(c[0] + 2, c[1] - c[0] - 3) : line.substr(c[0] + 1, c[1] - c[0] - 1);
        const std::string choice1 = line.substr(c[1] + 1, c[2] - c[1] - 1), choice2 = line.substr(c[2] + 1, c[3] - c[2] - 1);
        const std::string answer = line.substr(c[3] + 1);
        if (answer != "1" && answer != "2") {
            if (l == 0) {   // a header
                out.winogrande_header = true;
                continue;
            }
            err = what + ": the answer is '" + answer + "', not 1 or 2";
            return false;
        }
        const size_t blank = sentence.find('_');
        if (blank == std::string::npos) {
            err = what + ": the sentence has no '_' for the choice";
            return false;
        }
        if (choice1.empty() || choice2.empty()) {
            err = what + ": an empty choice";
            return false;
        }
        choice_task task;
        task.index = (uint32_t) out.tasks.size();
        const std::string first = sentence.substr(0, blank), second = sentence.substr(blank + 1);
        for (const std::string * ch : {&choice1, &choice2}) {
            task.texts.push_back(first + *ch + second);
            task.prefixes.push_back(first + *ch);
        }
        task.correct = {answer == "1", answer == "2"};
        out.tasks.push_back(std::move(task));
    }
    if (out.tasks.empty()) {
        err = name + ": no tasks";
        return false;
    }
    return true;
}

} // namespace

bool parse_choice_set(choice_format f, const std::string & bytes, const std::string & name, choice_set & out, std::string & err) {
    out = choice_set();
    out.format = f;
    switch (f) {
        case choice_format::multiple_choice: return parse_binary(bytes, name, out, err);
        case choice_format::hellaswag:       return parse_hellaswag(bytes, name, out, err);
        case choice_format::winogrande:      return parse_winogrande(bytes, name, out, err);
    }
    return false;
}

bool read_choice_set(choice_format f, const std::string & path, choice_set & out, std::string & err) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && (uint64_t) st.st_size > k_max_task_file) {
        err = std::string(choice_format_name(f)) + " task file '" + path + "' is " + std::to_string(st.st_size) +
              " bytes (at most " + std::to_string(k_max_task_file) + ")";
        return false;
    }
    std::string bytes;
    const std::string what = std::string(choice_format_name(f)) + " task file";
    if (!util::read_file(path, what.c_str(), bytes, err)) return false;
    return parse_choice_set(f, bytes, path, out, err);
}

std::vector<size_t> select_choice_tasks(const choice_set & set, size_t limit) {
    const size_t n = set.tasks.size();
    std::vector<size_t> picked;
    if (set.format == choice_format::hellaswag) {
        // perplexity.cpp: a uniform draw among the tasks left, each drawn task removed
        std::vector<size_t> left(n);
        for (size_t i = 0; i < n; ++i) left[i] = i;
        std::mt19937 rng(1);
        const size_t count = limit == 0 ? n : std::min(limit, n);
        for (size_t i = 0; i < count; ++i) {
            std::uniform_int_distribution<size_t> dist(0, left.size() - 1);
            const size_t j = dist(rng);
            picked.push_back(left[j]);
            left.erase(left.begin() + (long) j);
        }
        return picked;
    }
    if (limit == 0 || limit >= n) {
        for (size_t i = 0; i < n; ++i) picked.push_back(i);
        return picked;
    }
    // perplexity.cpp's multiple-choice and winogrande draw, float arithmetic as there
    std::mt19937 rng(1);
    std::vector<int> aux(n);
    for (size_t i = 0; i < n; ++i) aux[i] = (int) i;
    const float scale = 1.f / (1.f + (float) std::mt19937::max());
    for (size_t i = 0; i < limit; ++i) {
        const int j = (int) (scale * rng() * aux.size());
        picked.push_back((size_t) aux[j]);
        aux[j] = aux.back();
        aux.pop_back();
    }
    return picked;
}

float mean_logprob_float(float first, const std::vector<float> & rest) {
    float sum = first;
    for (float v : rest) sum += v;
    return sum / (float) (rest.size() + 1);
}

double mean_logprob_double(float first, const std::vector<float> & rest) {
    double sum = first;
    for (float v : rest) sum += v;
    return sum / (double) (rest.size() + 1);
}

} // namespace reap
