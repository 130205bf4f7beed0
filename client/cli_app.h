// The command line of `kiln` and the bench tools, declared to CLI11 (Debian's
// libcli11-dev) so every flag has one declaration its help text comes from.
// What Kiln adds around CLI11, the same for every tool:
//   - `--help` (on a command: that command's usage, flags and example) goes
//     to stdout and exits 0; `--version` prints common/build_info.h's lines;
//   - every flag may be spelt with dashes or underscores (--input-shape,
//     --input_shape);
//   - an unknown flag or command is an error naming the closest known one;
//   - the parsed values land in CliArgs, which the commands read.
#ifndef KILN_CLIENT_CLI_APP_H_
#define KILN_CLIENT_CLI_APP_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "client/cli_args.h"

namespace kiln::client {

// An app with Kiln's help and --version conventions.
std::unique_ptr<CLI::App> NewCliApp(const std::string& program, const std::string& description);

// A flag that takes no value.
CLI::Option* AddSwitch(CLI::App* app, const std::string& name, const std::string& help);
// A flag with one value; given twice, the last wins.
CLI::Option* AddValue(CLI::App* app, const std::string& name, const std::string& value_name,
                      const std::string& help);
// A flag that may be given many times, one value each.
CLI::Option* AddRepeated(CLI::App* app, const std::string& name, const std::string& value_name,
                         const std::string& help);
// The command's positional words, described in its usage line as `value_name`:
// at least `min`, at most `max` (-1: any number); fewer or more is an error.
CLI::Option* AddPositionals(CLI::App* app, const std::string& value_name, const std::string& help,
                            int min, int max);
// Shown under the command's --help.
void SetExample(CLI::App* app, const std::string& example);

// Parses argv. Returns the exit status when the program is done (0 after
// --help or --version, 2 after an error printed to stderr), nullopt when the
// command is to run with `*args`: positional[0] the chosen subcommand's name
// (the words of nested ones in order), then its positional words.
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv, CliArgs* args);

// "PROGRAM: problem" and where the usage is, on stderr; returns 2, the exit
// status of a command line the program cannot use.
int PrintUsageError(const std::string& program, const std::string& problem);

// --input_shape=x -> --input-shape=x: the flag's name (not its value) with
// underscores as dashes. Words after a bare "--" are left alone.
std::vector<std::string> NormalizeFlagSpelling(std::vector<std::string> words);

}  // namespace kiln::client

#endif  // KILN_CLIENT_CLI_APP_H_
