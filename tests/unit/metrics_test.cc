// The /metrics page: Prometheus text exposition format 0.0.4.
#include "core/metrics.h"

#include <string>

#include <gtest/gtest.h>

namespace faultline {
namespace {

// A counter keeps its every unit however large it grows: faultline_bytes_total passes 10^15
// after a petabyte of pushes (weeks at the push endpoints' rates), and a value cut to six digits
// would stay flat for hours between jumps, so that rate() reads 0.
TEST(Metrics, ALargeCounterIsRenderedExactly) {
  Metrics metrics;
  metrics.declare("faultline_bytes_total", Metrics::Type::kCounter, "Bytes");
  metrics.add("faultline_bytes_total", "", 1'234'567'890'123'456);
  metrics.add("faultline_bytes_total", "", 1);
  const std::string page = metrics.render();
  EXPECT_NE(page.find("\nfaultline_bytes_total 1234567890123457\n"), std::string::npos) << page;
}

}  // namespace
}  // namespace faultline
