// core/error.hpp and core/cuda_error.hpp: what each error says, and where.
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/error.hpp>
#include <squeeze/core/status.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

void needs_positive(int n) {
  SQUEEZE_EXPECTS(n > 0, "needs_positive: n must be positive");
}

}  // namespace

TEST(Error, ExpectsThrowsInvalidArgumentWithMessageConditionAndSite) {
  EXPECT_NO_THROW(needs_positive(1));
  try {
    needs_positive(-3);
    FAIL() << "no exception";
  } catch (const squeeze::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("squeeze: needs_positive: n must be positive"), std::string::npos) << what;
    EXPECT_NE(what.find("violated: n > 0"), std::string::npos) << what;
    EXPECT_NE(what.find("error_test.cpp"), std::string::npos) << what;
    EXPECT_NE(std::string{e.where().function_name()}.find("needs_positive"), std::string::npos);
    EXPECT_EQ(e.message().rfind("needs_positive", 0), 0u);
  }
}

TEST(Error, HierarchyLetsCallersCatchTheBase) {
  EXPECT_THROW(throw squeeze::format_error("bad header"), squeeze::error);
  EXPECT_THROW(throw squeeze::io_error("short read"), squeeze::error);
  EXPECT_THROW(throw squeeze::invalid_argument("bad size"), std::runtime_error);
  try {
    throw squeeze::format_error("stream truncated at byte 12");
  } catch (const squeeze::error& e) {
    EXPECT_EQ(e.message(), "stream truncated at byte 12");
    EXPECT_GT(e.where().line(), 0u);
  }
}

TEST(Error, CudaTryNamesTheCallAndTheError) {
  // A CUDA error code needs no device: the runtime names it without one.
  const auto fails = [] { SQUEEZE_CUDA_TRY(cudaErrorInvalidValue); };
  try {
    fails();
    FAIL() << "no exception";
  } catch (const squeeze::cuda_error& e) {
    EXPECT_EQ(e.code(), static_cast<int>(cudaErrorInvalidValue));
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaErrorInvalidValue failed: cudaErrorInvalidValue"), std::string::npos)
        << what;
    EXPECT_NE(what.find("error_test.cpp"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(SQUEEZE_CUDA_TRY(cudaSuccess));
}

TEST(Error, CudaTryEvaluatesTheCallOnce) {
  int calls = 0;
  const auto call = [&] {
    ++calls;
    return cudaSuccess;
  };
  SQUEEZE_CUDA_TRY(call());
  EXPECT_EQ(calls, 1);
}

TEST(Status, EveryStatusHasAName) {
  using squeeze::status;
  for (const status s : {status::ok, status::invalid_argument, status::out_of_bounds,
                         status::truncated, status::corrupt, status::io_error,
                         status::cache_full}) {
    EXPECT_STRNE(squeeze::to_string(s), "unknown status");
  }
  EXPECT_STREQ(squeeze::to_string(static_cast<status>(999)), "unknown status");
}
