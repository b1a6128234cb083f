// Multiple-choice task data in the three formats llama-perplexity reads, and
// the parts of its scoring rule that need no model: which tasks a --tasks-limit
// selects, which strings are tokenized for each choice, and how the per-token
// log-probabilities of a choice become its score and a task's pick. The model
// side (tokenizing, decoding, the log-softmax) is src/llama/choice.h.
//
// The formats (tools/perplexity/perplexity.cpp of the pinned llama.cpp):
//   multiple-choice (--multiple-choice): binary, little-endian. u32 n_task,
//     n_task u32 byte offsets of the tasks, then each task: string question,
//     then two answer sets (mc1: one correct; mc2: read and ignored), each
//     u32 n (at most 100), n strings, n i32 labels (1 = correct, 0 = not).
//     A string is u32 length + bytes. Choice s is tokenized as
//     question + " " + answer_s.
//   hellaswag (--hellaswag): text, 6 lines a task: context, the gold ending's
//     index (0..3), four endings. Choice s: context + " " + ending_s.
//   winogrande (--winogrande): CSV lines "index,sentence,choice1,choice2,answer"
//     (the sentence may be quoted; it holds one '_'; answer 1 or 2). Choice s:
//     the sentence with '_' replaced by choice_s; only the tokens after the
//     choice are scored when both choices leave more than 3 tokens after the
//     common prefix (llama.cpp's rule, kept exactly, its known off-by-one in
//     the second choice's first logit included).
// Differences from llama-perplexity, all on malformed input: where it skips a
// bad Winogrande line, stops at a malformed task, or reads a task at a wrong
// offset, these readers refuse the file naming the line, task or offset (a
// first Winogrande line that is a header is skipped). llama-perplexity drops
// the last line of a Winogrande CSV that does not end in an empty line (its
// -f strips one newline, then stops at the line that ends the text); these
// readers keep every line and say so (winogrande_last_line_dropped).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace reap {

enum class choice_format { multiple_choice, hellaswag, winogrande };

const char * choice_format_name(choice_format f);   // "multiple-choice", "hellaswag", "winogrande"
const char * choice_format_flag(choice_format f);   // "--multiple-choice", ...

// One task as the scorer needs it.
struct choice_task {
    uint32_t                 index = 0;   // its position in the file (0-based), for pairing and reports
    std::vector<std::string> texts;       // per choice, the string tokenized (with BOS as the vocabulary asks)
    std::vector<std::string> prefixes;    // winogrande: per choice, sentence up to and with the choice
    std::vector<uint8_t>     correct;     // per choice, 1 when picking it is right
};

struct choice_set {
    choice_format            format = choice_format::multiple_choice;
    std::vector<choice_task> tasks;       // in the file's order
    bool                     winogrande_header = false;   // its first line was a header, skipped
    bool                     winogrande_last_line_dropped = false;   // llama-perplexity would read one task fewer
};

// Parses a task file's bytes; `name` names it in messages ("tasks.bin: task 17
// (at byte 5321): label 2 is not 0 or 1"). Every count, length and offset is
// checked against the bytes before use; a task without a correct choice, an
// empty question or choice, or fewer than two choices is refused.
bool parse_choice_set(choice_format f, const std::string & bytes, const std::string & name, choice_set & out, std::string & err);

// Reads and parses the file at `path` (at most 1 GiB).
bool read_choice_set(choice_format f, const std::string & path, choice_set & out, std::string & err);

// The tasks --tasks-limit N scores, in llama-perplexity's order: with N = 0
// (or N at least the number of tasks) every task, in file order, except
// hellaswag, which always draws its order (std::mt19937 seeded 1); with
// 0 < N < tasks, the N tasks its seeded draw selects (hellaswag: a uniform
// draw without replacement; multiple-choice and winogrande: llama.cpp's
// float-scaled draw). Returns indices into set.tasks.
std::vector<size_t> select_choice_tasks(const choice_set & set, size_t limit);

// A task's score per choice from its token log-probabilities, as llama-perplexity
// computes it. `first` is the log-probability of the first choice token after
// the common prefix, taken from the prefix's last logits through a float
// softmax with a double denominator (as perplexity.cpp's softmax); `rest` are
// the later tokens' log-probabilities (float log-softmax). multiple-choice sums
// in float, hellaswag in double; both divide by the token count.
float  mean_logprob_float(float first, const std::vector<float> & rest);
double mean_logprob_double(float first, const std::vector<float> & rest);

// The pick: the first choice with the highest score (strictly greater wins).
template <class T> size_t pick_best(const std::vector<T> & scores) {
    size_t best = 0;
    for (size_t s = 1; s < scores.size(); ++s) {
        if (scores[s] > scores[best]) best = s;
    }
    return best;
}

} // namespace reap
