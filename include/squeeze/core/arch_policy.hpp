// SPDX-License-Identifier: Apache-2.0
// squeeze/core/arch_policy.hpp: a family's tuning chosen per GPU architecture, at compile
// time (CUB's policy_selector pattern).
//
// A family writes one policy struct per architecture it has values for, each with a
// `static constexpr int arch` (10 x major + minor: 80, 90), and makes its default policy
// `struct my_policy : core::arch_policy<my_policy_sm80, my_policy_sm90> {};`. In each
// device pass that default takes the entry of the newest architecture not newer than the one
// compiled for (an sm_86 build takes sm_80's, sm_100 takes sm_90's); in the host pass it
// takes the newest. The host and every device pass must agree on what the host reads (launch
// shapes, shared-memory sizes, which inputs are accepted): a family checks those members
// with `static_assert` across its entries, and lets entries differ only in what device code
// alone reads. A user's own policy is any struct with the members; it is used as given on
// every architecture.
#pragma once

#include <type_traits>

namespace squeeze::core {

/// The architecture the current device pass compiles for (10 x major + minor), 0 in the
/// host pass.
#if defined(__CUDA_ARCH__)
inline constexpr int compiled_arch = __CUDA_ARCH__ / 10;
#else
inline constexpr int compiled_arch = 0;
#endif

namespace detail {
template <int Arch, class Chosen, class... Entries>
struct newest_not_after {
  using type = Chosen;
};
template <int Arch, class Chosen, class Next, class... Rest>
struct newest_not_after<Arch, Chosen, Next, Rest...>
    : newest_not_after<Arch, std::conditional_t<(Arch == 0 || Next::arch <= Arch), Next, Chosen>,
                       Rest...> {};
}  // namespace detail

/// Of `Entries` (oldest first, each with `static constexpr int arch`), the entry for
/// architecture `Arch`: the newest not newer than it, the oldest if all are newer, the
/// newest when Arch is 0 (the host pass).
template <int Arch, class First, class... Rest>
using policy_for_arch = typename detail::newest_not_after<Arch, First, Rest...>::type;

/// The entry for the pass being compiled; derive a family's default policy from it.
template <class First, class... Rest>
using arch_policy = policy_for_arch<compiled_arch, First, Rest...>;

}  // namespace squeeze::core
