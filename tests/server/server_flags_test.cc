// kiln-server's command line as a user meets it: --help lists every flag with
// its meaning and default, and a --flagfile configures the server.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/triton_client_util.h"

namespace kiln {
namespace {

using ::kiln::testing::ChannelTo;
using ::kiln::testing::ServerProcess;
using ::testing::HasSubstr;
using ::testing::Not;

std::string RunCommand(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

TEST(ServerFlagsTest, HelpListsEveryFlagWithItsMeaningAndDefault) {
  const std::string help = RunCommand("server/kiln-server --help 2>&1");
  EXPECT_THAT(help, ::testing::Not(HasSubstr("No flags matched")));
  EXPECT_THAT(help, HasSubstr("--flagfile"));
  // A sample across the file, each with its help text and default.
  EXPECT_THAT(help, HasSubstr("--port (port to listen on (0 picks a free one)); default: 50051;"));
  EXPECT_THAT(help, HasSubstr("--address (address to bind); default: \"127.0.0.1\";"));
  for (const char* flag :
       {"--model_repository", "--max_models", "--cache_dir", "--shutdown_grace_s", "--auth_tokens",
        "--infer_spin_us", "--kernel_bounds_checks", "--max_concurrent_streams"}) {
    EXPECT_THAT(help, HasSubstr(flag));
  }
  // Every flag's entry (from its "--name" to the next; Abseil wraps lines)
  // ends with its default.
  size_t flags = 0, defaults = 0;
  for (size_t at = help.find("\n    --"); at != std::string::npos;) {
    const size_t next = help.find("\n    --", at + 1);
    std::string entry = help.substr(at, next == std::string::npos ? next : next - at);
    std::string flat;  // whitespace runs as one space
    for (char c : entry) {
      const bool space = c == ' ' || c == '\n';
      if (!space || (!flat.empty() && flat.back() != ' ')) flat += space ? ' ' : c;
    }
    ++flags;
    if (flat.find("); default: ") != std::string::npos) {
      ++defaults;
    } else {
      ADD_FAILURE() << "no default: " << flat;
    }
    at = next;
  }
  EXPECT_GE(flags, 29u);  // server_main.cc's 29 when this was written
  EXPECT_EQ(defaults, flags);
}

// --version names Kiln's version, LLVM's and the build (Abseil's default
// said only "Debug build (NDEBUG not #defined)").
TEST(ServerFlagsTest, VersionNamesKilnLlvmAndTheBuild) {
  const std::string version = RunCommand("server/kiln-server --version 2>&1");
  EXPECT_THAT(version, HasSubstr(std::string("kiln-server ") + kKilnVersion + "\n"));
  EXPECT_THAT(version, HasSubstr("LLVM 16."));
  EXPECT_THAT(version, HasSubstr("build: C++17"));
  EXPECT_THAT(version, Not(HasSubstr("NDEBUG not")));
}

// --help groups the flags under headings (one file per group) and each
// flag sits in its group.
TEST(ServerFlagsTest, HelpGroupsTheFlags) {
  const std::string help = RunCommand("server/kiln-server --help 2>&1");
  const std::vector<std::pair<std::string, std::string>> placed = {
      {"network", "--port "},          {"http_metrics", "--http_port "},
      {"security", "--auth_tokens "},  {"cache", "--cache_dir "},
      {"compile", "--compile_threads "}, {"limits", "--max_models "},
      {"inference", "--infer_spin_us "}, {"logging", "--log_format "},
      {"cache", "--remote_cache "},      {"cache", "--remote_cache_ttl_s "}};
  for (const auto& [group, flag] : placed) {
    const std::string heading = "Flags from server/flags/" + group + ".cc:";
    const size_t at = help.find(heading);
    ASSERT_NE(at, std::string::npos) << heading;
    const size_t next = help.find("Flags from", at + heading.size());
    const std::string section = help.substr(at, next == std::string::npos ? next : next - at);
    EXPECT_THAT(section, HasSubstr(flag)) << group;
  }
  EXPECT_THAT(help, HasSubstr("XDG_CACHE_HOME"));
}

TEST(ServerFlagsTest, FlagfileConfiguresTheServerInEitherSpelling) {
  const std::string root = testing::TestTmpDir("server_flags_test");
  const std::string repo = testing::WriteRepository(root, {});
  const std::string flagfile = root + "/kiln.flags";
  testing::WriteFile(flagfile,
                     "# kiln-server flags\n"
                     "--model-repository=" +
                         repo +
                         "\n"
                         "\n"
                         "  --threads=3\n");
  ServerProcess server(root + "/cache", {"--flagfile=" + flagfile});
  ASSERT_GT(server.port(), 0);
  auto inference = inference::GRPCInferenceService::NewStub(ChannelTo(server));
  inference::ModelReadyRequest request;
  request.set_name("mlp");
  inference::ModelReadyResponse response;
  grpc::ClientContext ctx;
  ASSERT_TRUE(inference->ModelReady(&ctx, request, &response).ok());
  EXPECT_TRUE(response.ready());  // loaded from the flag file's repository

  auto compiler = kiln::v1::Compiler::NewStub(ChannelTo(server));
  kiln::v1::GetServerInfoResponse info;
  grpc::ClientContext info_ctx;
  ASSERT_TRUE(compiler->GetServerInfo(&info_ctx, kiln::v1::GetServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.threads(), 3);  // the flag file's, after the command line's --threads=1
}

TEST(ServerFlagsTest, AMissingFlagfileStopsTheServerWithItsName) {
  const std::string out =
      RunCommand("server/kiln-server --flagfile=/no/such/kiln.flags 2>&1; echo rc=$?");
  EXPECT_THAT(out, HasSubstr("/no/such/kiln.flags"));
  EXPECT_THAT(out, HasSubstr("rc=2"));
}

TEST(ServerFlagsTest, BadRemoteCacheFlagsStopTheServer) {
  std::string out =
      RunCommand("server/kiln-server --port=0 --remote-cache=http://h:1 2>&1; echo rc=$?");
  EXPECT_THAT(out, HasSubstr("--remote-cache: remote cache URL 'http://h:1'"));
  EXPECT_THAT(out, HasSubstr("redis://HOST:PORT[/DB]"));
  EXPECT_THAT(out, HasSubstr("rc=2"));
  out = RunCommand(
      "server/kiln-server --port=0 --remote-cache=redis://h:1 --remote-cache-ttl-s=0 2>&1; "
      "echo rc=$?");
  EXPECT_THAT(out, HasSubstr("--remote-cache-ttl-s"));
  EXPECT_THAT(out, HasSubstr("rc=2"));
}

TEST(ServerFlagsTest, BadModelControlFlagsStopTheServer) {
  std::string out =
      RunCommand("server/kiln-server --port=0 --model-control-mode=sometimes 2>&1; echo rc=$?");
  EXPECT_THAT(out, HasSubstr("--model-control-mode must be none, explicit or poll"));
  EXPECT_THAT(out, HasSubstr("rc=2"));
  out = RunCommand("server/kiln-server --port=0 --load-model=a 2>&1; echo rc=$?");
  EXPECT_THAT(out, HasSubstr("--load-model needs --model-control-mode=explicit"));
  EXPECT_THAT(out, HasSubstr("rc=2"));
  out = RunCommand(
      "server/kiln-server --port=0 --model-control-mode=poll --repository-poll-secs=0 2>&1; "
      "echo rc=$?");
  EXPECT_THAT(out, HasSubstr("--repository-poll-secs must be at least 1"));
  EXPECT_THAT(out, HasSubstr("rc=2"));
}

}  // namespace
}  // namespace kiln
