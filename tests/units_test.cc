#include <doctest/doctest.h>

#include "runtime/units.h"

using namespace corral;
using std::chrono::milliseconds;

TEST_CASE("sizes: bare bytes and 1024-based suffixes") {
  CHECK(*parse_size("0") == 0);
  CHECK(*parse_size("1000") == 1000);
  CHECK(*parse_size("64K") == 65536);
  CHECK(*parse_size("1M") == 1048576);
  CHECK(*parse_size("2G") == 2147483648ULL);
  CHECK(*parse_size("1.5K") == 1536);
  CHECK(*parse_size("3MiB") == 3 * 1048576);
}

TEST_CASE("sizes: bad input is refused with a message") {
  for (const char* bad : {"", "-1", "K", "12X", "1.3", "abc", "1e3", "99999999999999999999G"}) {
    CAPTURE(bad);
    auto r = parse_size(bad);
    CHECK_FALSE(r.ok());
    if (!r.ok()) CHECK(!r.status().message().empty());
  }
}

TEST_CASE("durations: bare seconds and ms/s/m/h") {
  CHECK(*parse_duration("2") == milliseconds(2000));
  CHECK(*parse_duration("500ms") == milliseconds(500));
  CHECK(*parse_duration("2s") == milliseconds(2000));
  CHECK(*parse_duration("1.5") == milliseconds(1500));
  CHECK(*parse_duration("1m") == milliseconds(60000));
  CHECK(*parse_duration("1h") == milliseconds(3600000));
  for (const char* bad : {"", "-1", "s", "10d", "1..2", "ms"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_duration(bad).ok());
  }
}

TEST_CASE("formatting round-trips the common values") {
  CHECK(format_size(1048576) == "1M");
  CHECK(format_size(65536) == "64K");
  CHECK(format_size(1000) == "1000");
  CHECK(format_duration(milliseconds(120000)) == "2m");
  CHECK(format_duration(milliseconds(1500)) == "1500ms");
  CHECK(format_duration(milliseconds(2000)) == "2s");
}
