// SPDX-License-Identifier: Apache-2.0
// core/error.hpp and core/cuda_error.hpp: what each error says, and where.
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/error.hpp>
#include <squeeze/core/status.hpp>

#include <gtest/gtest.h>

#include <cstdint>
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
    EXPECT_EQ(what, "squeeze: needs_positive: n must be positive (violated: n > 0)");
    EXPECT_EQ(what, "squeeze: " + e.message());
    EXPECT_NE(std::string{e.where().file_name()}.find("error_test.cpp"), std::string::npos);
    EXPECT_NE(std::string{e.where().function_name()}.find("needs_positive"), std::string::npos);
  }
}

// what() is for the person running the program; what_and_where() adds the call site.
TEST(Error, WhatLeavesTheCallSiteToWhatAndWhere) {
  const int line = __LINE__ + 2;
  try {
    throw squeeze::format_error("stream truncated at byte 12");
  } catch (const squeeze::error& e) {
    EXPECT_STREQ(e.what(), "squeeze: stream truncated at byte 12");
    EXPECT_EQ(std::string{e.what()}.find('['), std::string::npos) << e.what();
    EXPECT_EQ(e.where().line(), static_cast<std::uint_least32_t>(line));
    const std::string full = e.what_and_where();
    const std::string site = std::string{" ["} + e.where().file_name() + ':' +
                             std::to_string(line) + " in " + e.where().function_name() + ']';
    EXPECT_EQ(full, std::string{e.what()} + site) << full;
    EXPECT_NE(full.find("error_test.cpp:" + std::to_string(line) + " in "), std::string::npos)
        << full;
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
    EXPECT_EQ(what.rfind("squeeze: cudaErrorInvalidValue failed: cudaErrorInvalidValue (", 0), 0u)
        << what;
    EXPECT_EQ(what.find("error_test.cpp"), std::string::npos) << what;
    EXPECT_NE(e.what_and_where().find("error_test.cpp"), std::string::npos) << e.what_and_where();
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
