// test_cli_imatrix.cpp: `reap imatrix` end to end, on the imatrix files and
// model of imatrix_test_util.h: two files as two domains (the default name
// and --domain NAME=), the unused experts on stdout, the archive read back;
// an existing output refused (exit 2), and a file of another model refused
// (exit 2). The reader and the import themselves: test_imatrix.cpp.
#include "imatrix_test_util.h"

#include "saliency/archive.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <sys/wait.h>

namespace sl = reap::saliency;
using namespace imatrix_test;

namespace {

TEST_F(ImatrixTest, Cli) {
    const std::string bin = gguf_test::reap_bin();
    if (!gguf_test::exists(bin)) GTEST_SKIP() << "no " << bin;
    write_gguf_imatrix(dir + "/en.gguf", default_entries({5, 0, 2, 1}, {3, 3, 2, 0}));
    write_gguf_imatrix(dir + "/b.gguf", default_entries({1, 1, 1, 1}, {1, 1, 1, 1}));
    const std::string cmd = "'" + bin + "' imatrix -m '" + model_path + "' '" + dir + "/en.gguf' --domain code='" + dir +
                            "/b.gguf' -o '" + dir + "/s.gguf' > '" + dir + "/out.txt' 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    const auto out = gguf_test::read_all(dir + "/out.txt");
    const std::string text(out.begin(), out.end());
    EXPECT_NE(text.find("layer 0: no tokens for expert 1"), std::string::npos) << text;
    sl::archive a;
    std::string err;
    ASSERT_TRUE(sl::read_archive(dir + "/s.gguf", a, err)) << err;
    ASSERT_EQ(a.domains.size(), 2u);
    EXPECT_EQ(a.domains[0].name, "en");
    EXPECT_EQ(a.domains[1].name, "code");
    // refuses to overwrite; a file from another model fails with status 2
    EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 2);
    gguf_test::model_options mo;
    mo.n_expert = 8;
    gguf_test::write_model(dir + "/other.gguf", mo);
    const std::string cmd2 = "'" + bin + "' imatrix -m '" + dir + "/other.gguf' '" + dir + "/en.gguf' -o '" + dir +
                             "/t.gguf' > /dev/null 2>&1";
    EXPECT_EQ(WEXITSTATUS(std::system(cmd2.c_str())), 2);
}

}  // namespace
