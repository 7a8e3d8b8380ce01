// The documents in docs/ keep up with the code: every message of the wire protocol is
// described in docs/protocol.md, and every document the repository points at is in it.
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <set>

#include "tests/test_util.h"

using namespace corral::test;
namespace fs = std::filesystem;

namespace {

const std::string kSource = CORRAL_SOURCE_DIR;

// The members of `union Body { ... }` in corral.fbs.
std::vector<std::string> union_members() {
  std::string schema = read_file(kSource + "/worker_proto/corral.fbs");
  auto start = schema.find("union Body {");
  REQUIRE(start != std::string::npos);
  auto end = schema.find('}', start);
  REQUIRE(end != std::string::npos);
  std::vector<std::string> names;
  static const std::regex member(R"(([A-Za-z_][A-Za-z0-9_]*)\s*(?:,|$))");
  std::string body = schema.substr(start + 12, end - start - 12);
  for (std::sregex_iterator it(body.begin(), body.end(), member), stop; it != stop; ++it) names.push_back((*it)[1]);
  return names;
}

// The repository's own text files: everything but build trees, .git and installed packages.
std::vector<fs::path> repository_files() {
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(kSource); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name.rfind("build", 0) == 0 || name == ".git" || name == "node_modules" || name == "corpus")) {
      it.disable_recursion_pending();
      continue;
    }
    static const std::set<std::string> kText = {".cc", ".h", ".py", ".sh", ".md", ".txt", ".fbs", ".json", ".js", ""};
    if (it->is_regular_file() && kText.count(it->path().extension().string())) out.push_back(it->path());
  }
  return out;
}

}  // namespace

TEST_CASE("docs/protocol.md describes every message of corral.fbs") {
  const std::string doc = read_file(kSource + "/docs/protocol.md");
  REQUIRE_FALSE(doc.empty());
  auto members = union_members();
  CHECK(members.size() >= 40);  // the parse found the union, not a fragment of it
  for (const auto& name : members) {
    CAPTURE(name);
    // Described: named in bold code where its use is explained, not only mentioned.
    CHECK(doc.find("**`" + name + "`**") != std::string::npos);
  }
  // And every error code.
  std::string schema = read_file(kSource + "/worker_proto/corral.fbs");
  auto start = schema.find("enum ErrorCode");
  auto end = schema.find('}', start);
  static const std::regex code(R"(\n\s+([a-z_]+) = \d+,)");
  std::string body = schema.substr(start, end - start);
  int codes = 0;
  for (std::sregex_iterator it(body.begin(), body.end(), code), stop; it != stop; ++it, ++codes) {
    CAPTURE((*it)[1]);
    CHECK(doc.find("| `" + std::string((*it)[1]) + "` |") != std::string::npos);
  }
  CHECK(codes >= 17);
}

TEST_CASE("every document the repository points at is in it") {
  // A pointer is a path like docs/<name>.md (in a comment, a link or the README), or the name of
  // an uppercase design document that once lived outside the repository.
  static const std::regex pointer(R"(docs/([A-Za-z0-9_-]+\.md))");
  const std::string outside = std::string("DESIGN") + ".md";  // spelled so this file does not match
  int pointers = 0;
  for (const auto& file : repository_files()) {
    const std::string text = read_file(file.string());
    CAPTURE(file.string());
    CHECK(text.find(outside) == std::string::npos);
    for (std::sregex_iterator it(text.begin(), text.end(), pointer), stop; it != stop; ++it, ++pointers) {
      CAPTURE((*it)[0]);
      CHECK(fs::exists(kSource + "/docs/" + std::string((*it)[1])));
    }
  }
  CHECK(pointers > 10);
  // Links between the documents (design.md -> threat-model.md) resolve too.
  static const std::regex link(R"(\]\(([a-z-]+\.md)[)#])");
  for (const char* doc : {"design.md", "threat-model.md", "protocol.md"}) {
    const std::string text = read_file(kSource + "/docs/" + doc);
    for (std::sregex_iterator it(text.begin(), text.end(), link), stop; it != stop; ++it) {
      CAPTURE((*it)[1]);
      CHECK(fs::exists(kSource + "/docs/" + std::string((*it)[1])));
    }
  }
}
