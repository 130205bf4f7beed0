#include "client/cli_app.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/did_you_mean.h"
#include "common/build_info.h"

namespace kiln::client {
namespace {

// The chosen subcommands, outermost first (the app itself not included).
std::vector<const CLI::App*> ChosenCommands(const CLI::App& app) {
  std::vector<const CLI::App*> chain;
  const CLI::App* at = &app;
  while (!at->get_subcommands().empty()) {
    at = at->get_subcommands().front();
    chain.push_back(at);
  }
  return chain;
}

// The long flag names `command` accepts, its parents' included.
std::vector<std::string> FlagNames(const CLI::App& app, const CLI::App* command) {
  std::vector<std::string> names;
  for (const CLI::App* at = command; at != nullptr; at = at->get_parent()) {
    for (const CLI::Option* opt : at->get_options()) {
      for (const std::string& n : opt->get_lnames()) names.push_back(n);
    }
    if (at == &app) break;
  }
  return names;
}

// "unknown flag --foo (did you mean --food?)" and the like for the words
// CLI11 found no place for.
std::string DescribeExtras(const CLI::App& app, const std::vector<std::string>& extras) {
  std::vector<const CLI::App*> chain = ChosenCommands(app);
  const CLI::App* command = chain.empty() ? &app : chain.back();
  const std::string word = extras.empty() ? "" : extras.front();
  const size_t name_start = word.find_first_not_of('-');
  if (absl::StartsWith(word, "-") && name_start != std::string::npos) {
    const std::string flag = word.substr(0, word.find('='));
    return absl::StrCat("unknown flag ", flag,
                        DidYouMean(flag.substr(name_start), FlagNames(app, command), "--"));
  }
  if (command->get_subcommands({}).size() > 0 && command->get_subcommands().empty()) {
    std::vector<std::string> names;
    for (const CLI::App* sub : command->get_subcommands({})) names.push_back(sub->get_name());
    return absl::StrCat("unknown command '", word, "'", DidYouMean(word, names));
  }
  return absl::StrCat("unexpected argument '", word, "'");
}

// "kiln compile" for the command the error is about.
std::string CommandPath(const CLI::App& app) {
  std::string path = app.get_name();
  for (const CLI::App* sub : ChosenCommands(app)) absl::StrAppend(&path, " ", sub->get_name());
  return path;
}

}  // namespace

std::unique_ptr<CLI::App> NewCliApp(const std::string& program, const std::string& description) {
  auto app = std::make_unique<CLI::App>(description, program);
  app->set_version_flag("--version", VersionText(program),
                        "Print Kiln's, LLVM's and the build's versions");
  app->set_help_flag("-h,--help", "Print this help and exit");
  app->footer("Flags may be spelt with dashes or underscores (--input-shape, --input_shape).");
  return app;
}

CLI::Option* AddSwitch(CLI::App* app, const std::string& name, const std::string& help) {
  return app->add_flag("--" + name, help);
}

CLI::Option* AddValue(CLI::App* app, const std::string& name, const std::string& value_name,
                      const std::string& help) {
  return app->add_option("--" + name, help)
      ->type_name(value_name)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

CLI::Option* AddRepeated(CLI::App* app, const std::string& name, const std::string& value_name,
                         const std::string& help) {
  return app->add_option("--" + name, help)
      ->type_name(value_name + " (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

CLI::Option* AddPositionals(CLI::App* app, const std::string& value_name, const std::string& help,
                            int min, int max) {
  // An optional positional still takes at least one value when present:
  // CLI11 never matches a positional whose minimum is 0.
  CLI::Option* opt = app->add_option(value_name, help)
                         ->expected(std::max(min, 1),
                                    max < 0 ? CLI::detail::expected_max_vector_size : max)
                         ->allow_extra_args(max != 1);
  if (min > 0) opt->required();
  return opt;
}

void SetExample(CLI::App* app, const std::string& example) {
  app->footer(
      absl::StrCat("Example:\n  ", example, "\nFlags may be spelt with dashes or underscores."));
}

int PrintUsageError(const std::string& program, const std::string& problem) {
  std::cerr << program << ": " << problem << "\nRun '" << program << " --help' for its usage.\n";
  return 2;
}

std::vector<std::string> NormalizeFlagSpelling(std::vector<std::string> words) {
  for (std::string& w : words) {
    if (w == "--") break;
    if (!absl::StartsWith(w, "--")) continue;
    const size_t end = std::min(w.find('='), w.size());
    std::replace(w.begin() + 2, w.begin() + end, '_', '-');
  }
  return words;
}

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv, CliArgs* args) {
  std::vector<std::string> words =
      NormalizeFlagSpelling(std::vector<std::string>(argv + std::min(argc, 1), argv + argc));
  std::reverse(words.begin(), words.end());  // CLI11 takes them last first
  try {
    app.parse(words);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, std::cout, std::cerr);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e, std::cout, std::cerr);
  } catch (const CLI::ExtrasError&) {
    // remaining(): the words no command took, in command-line order.
    std::cerr << CommandPath(app) << ": " << DescribeExtras(app, app.remaining(true)) << "\n"
              << "Run '" << CommandPath(app) << " --help' for its flags.\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    std::cerr << CommandPath(app) << ": " << e.what() << "\n"
              << "Run '" << CommandPath(app) << " --help' for its flags.\n";
    return 2;
  }
  *args = CliArgs();
  std::vector<const CLI::App*> chain = ChosenCommands(app);
  chain.insert(chain.begin(), &app);
  for (const CLI::App* at : chain) {
    if (at != &app) args->positional.push_back(at->get_name());
    for (const CLI::Option* opt : at->get_options()) {
      if (opt->count() == 0 || opt == at->get_help_ptr() || opt == at->get_version_ptr()) {
        continue;
      }
      if (opt->get_positional() && !opt->nonpositional()) {
        for (const std::string& r : opt->results()) args->positional.push_back(r);
      } else if (opt->get_expected_max() == 0) {  // a switch
        args->switches.insert(opt->get_single_name());
      } else {
        for (const std::string& r : opt->results()) args->flags.emplace(opt->get_single_name(), r);
      }
    }
  }
  return std::nullopt;
}

}  // namespace kiln::client
