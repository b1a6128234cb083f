// reap: the command-line entry point. Looks the subcommand up in the table of
// src/cli/commands.h and hands it the remaining arguments; suggests the closest
// name when the subcommand is unknown.
#include "cli/args.h"
#include "cli/commands.h"
#include "util/file.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static size_t edit_distance(const std::string & a, const std::string & b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? size_t(0) : size_t(1))});
            diag = up;
        }
    }
    return row[b.size()];
}

static void print_help(FILE * out) {
    fprintf(out, "reap: prune the experts of Mixture-of-Experts GGUF models, and prove what it cost\n\n");
    fprintf(out, "usage: reap COMMAND [ARGS...]     reap COMMAND --help for its options\n\ncommands:\n");
    std::vector<const reap::command *> missing;  // run a model: not in a build without llama.cpp
    for (const reap::command & c : reap::commands()) {
        if (c.runs_model && !reap::built_with_llama()) {
            missing.push_back(&c);
        } else {
            fprintf(out, "  %-10s %s\n", c.name, c.summary);
        }
    }
    if (!missing.empty()) {
        fprintf(out, "\nnot in this build (reap was built without llama.cpp: cmake -DREAP_WITH_LLAMA=OFF):\n");
        for (const reap::command * c : missing) fprintf(out, "  %-10s %s\n", c->name, c->summary);
    }
    fprintf(out,
            "\nexit status, as cmp and diff use theirs:\n"
            "  0    success; what was checked holds\n"
            "  1    checked and it does not hold: verify's OUT is not MODEL pruned by PLAN\n"
            "  2    usage error, an input that cannot be read or is malformed, or a write that failed\n"
            "  130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM: temp files removed, nothing partial\n"
            "       published (calibrate on Ctrl-C first writes its checkpoint)\n");
}

int main(int argc, char ** argv) {
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        if (argc >= 3 && !strcmp(argv[1], "help")) {
            for (const reap::command & c : reap::commands()) {
                if (argv[2] == std::string(c.name)) {
                    char help[] = "--help";
                    char * args[] = {argv[2], help, nullptr};
                    return c.run(2, args);
                }
            }
        }
        print_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? reap::cli::exit_error : reap::cli::exit_ok;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("reap %s\n", REAP_VERSION);
        return 0;
    }
    const std::string name = argv[1];
    const reap::command * best = nullptr;
    size_t best_dist = SIZE_MAX;
    for (const reap::command & c : reap::commands()) {
        if (name == c.name) {
            reap::util::install_interrupt_handlers(c.name);   // SIGINT/SIGTERM: temps removed, 130/143
            const int status = c.run(argc - 1, argv + 1);
            // What went to stdout (a table, a JSON) is an output too: redirected to a
            // full disk or a closed pipe it must not end in exit 0.
            errno = 0;
            if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "reap %s: cannot write the standard output: %s\n", c.name,
                        errno ? strerror(errno) : "write error");
                return reap::cli::exit_error;
            }
            return status;
        }
        const size_t d = edit_distance(name, c.name);
        if (d < best_dist) {
            best_dist = d;
            best = &c;
        }
    }
    fprintf(stderr, "reap: unknown command '%s'", name.c_str());
    if (best && best_dist <= 2) {
        fprintf(stderr, "; did you mean '%s'?", best->name);
    }
    fprintf(stderr, "\nrun 'reap help' for the list of commands\n");
    return reap::cli::exit_error;
}
