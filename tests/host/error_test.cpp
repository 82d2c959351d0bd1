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
  for (const status s :
       {status::ok, status::invalid_argument, status::out_of_bounds, status::truncated,
        status::corrupt, status::io_error, status::cache_full}) {
    EXPECT_STRNE(squeeze::to_string(s), "unknown status");
  }
  EXPECT_STREQ(squeeze::to_string(static_cast<status>(999)), "unknown status");
}

// The one mapping from a device status to an exception (core::device_status::check uses it).
TEST(Error, ThrowIfErrorMapsEveryStatusToItsException) {
  EXPECT_NO_THROW(squeeze::throw_if_error(squeeze::status::ok, "nothing"));
  const auto thrown_for = [](squeeze::status s) -> std::string {
    try {
      squeeze::throw_if_error(s, std::string{"op: "} + squeeze::to_string(s));
    } catch (const squeeze::invalid_argument& e) {
      EXPECT_EQ(e.message(), std::string{"op: "} + squeeze::to_string(s));
      EXPECT_NE(std::string{e.where().file_name()}.find("error_test.cpp"), std::string::npos);
      return "invalid_argument";
    } catch (const squeeze::format_error&) {
      return "format_error";
    } catch (const squeeze::io_error&) {
      return "io_error";
    } catch (const squeeze::error& e) {
      EXPECT_NE(e.message().find(squeeze::to_string(s)), std::string::npos);
      return "error";
    }
    return "nothing";
  };
  using squeeze::status;
  EXPECT_EQ(thrown_for(status::invalid_argument), "invalid_argument");
  EXPECT_EQ(thrown_for(status::out_of_bounds), "invalid_argument");
  EXPECT_EQ(thrown_for(status::truncated), "format_error");
  EXPECT_EQ(thrown_for(status::corrupt), "format_error");
  EXPECT_EQ(thrown_for(status::io_error), "io_error");
  EXPECT_EQ(thrown_for(status::cache_full), "error");
  EXPECT_EQ(thrown_for(static_cast<status>(99)), "error");  // a value no enumerator names
}
