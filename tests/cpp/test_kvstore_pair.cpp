// The kvstore pair's state machine (pair_state.hpp): the Binary Star rules, and that any two states
// the pair can be in settle, by heartbeats alone, on exactly one active.
#include <gtest/gtest.h>

#include <chrono>
#include <utility>
#include <vector>

#include "sectorflow/kvstore/pair_state.hpp"

namespace {

using sectorflow::kvstore::PairMachine;
using sectorflow::kvstore::PairState;
using namespace std::chrono_literals;

constexpr auto kSilence = 2s;

struct Pair {
  PairMachine::Clock::time_point now = PairMachine::Clock::now();
  PairMachine primary{true, kSilence, now};
  PairMachine backup{false, kSilence, now};

  void later(PairMachine::Clock::duration by) { now += by; }
  /// `from` tells `to` its state, as its heartbeat does.
  static PairMachine::Outcome tell(const PairMachine& from, PairMachine& to, PairMachine::Clock::time_point at) {
    return to.on_peer(from.state(), at);
  }
};

TEST(KvstorePair, StartsWithThePrimaryActiveAndTheBackupMirroringIt) {
  Pair pair;
  EXPECT_EQ(Pair::tell(pair.primary, pair.backup, pair.now).after, PairState::kBackup);  // waits for an active
  const auto outcome = Pair::tell(pair.backup, pair.primary, pair.now);
  EXPECT_TRUE(outcome.changed());
  EXPECT_EQ(outcome.after, PairState::kActive);
  EXPECT_EQ(Pair::tell(pair.primary, pair.backup, pair.now).after, PairState::kPassive);
  EXPECT_TRUE(pair.primary.on_request(pair.now).serve);
  EXPECT_FALSE(pair.backup.on_request(pair.now).serve);  // the active lives
  EXPECT_EQ(pair.backup.state(), PairState::kPassive);
}

TEST(KvstorePair, ThePassiveTakesOverOnlyWhenTheActiveIsSilentAndAClientAsks) {
  Pair pair;
  Pair::tell(pair.backup, pair.primary, pair.now);
  Pair::tell(pair.primary, pair.backup, pair.now);
  ASSERT_EQ(pair.backup.state(), PairState::kPassive);
  // The active dies: silence alone changes nothing, and a request within the silence period is refused.
  pair.later(kSilence - 1ms);
  EXPECT_FALSE(pair.backup.on_request(pair.now).serve);
  EXPECT_EQ(pair.backup.state(), PairState::kPassive);
  pair.later(1ms);
  EXPECT_EQ(pair.backup.state(), PairState::kPassive);
  const auto failover = pair.backup.on_request(pair.now);
  EXPECT_TRUE(failover.serve);
  EXPECT_EQ(failover.after, PairState::kActive);
  EXPECT_FALSE(failover.why.empty());
  // The old primary restarts: it hears the active backup and mirrors it; a client that asks it
  // before it heard anything is refused while the backup could be active (failback).
  PairMachine restarted{true, kSilence, pair.now};
  EXPECT_FALSE(restarted.on_request(pair.now).serve);
  EXPECT_EQ(restarted.on_peer(pair.backup.state(), pair.now).after, PairState::kPassive);
  EXPECT_EQ(pair.backup.on_peer(restarted.state(), pair.now).after, PairState::kActive);
}

TEST(KvstorePair, ABackupNeverServesBeforeItMirroredAnActive) {
  Pair pair;
  pair.later(10 * kSilence);  // no primary ever came
  EXPECT_FALSE(pair.backup.on_request(pair.now).serve);
  EXPECT_EQ(pair.backup.state(), PairState::kBackup);
}

TEST(KvstorePair, APrimaryAloneServesOnceItsBackupIsSilentForTheSilencePeriod) {
  Pair pair;
  EXPECT_FALSE(pair.primary.on_request(pair.now).serve);
  pair.later(kSilence);
  EXPECT_TRUE(pair.primary.on_request(pair.now).serve);
  EXPECT_EQ(pair.primary.state(), PairState::kActive);
}

TEST(KvstorePair, MisconfiguredPairsSayWhy) {
  const auto now = PairMachine::Clock::now();
  PairMachine a{true, kSilence, now};
  PairMachine b{true, kSilence, now};
  const auto outcome = a.on_peer(b.state(), now);
  EXPECT_FALSE(outcome.changed());
  EXPECT_NE(outcome.why.find("configured as the backup"), std::string_view::npos);
}

/// Drives a machine into `state` by the events that lead there.
void reach(PairMachine& machine, PairState state, PairMachine::Clock::time_point& now) {
  if (state == PairState::kPrimary || state == PairState::kBackup) return;
  machine.on_peer(PairState::kActive, now);  // passive
  if (state == PairState::kActive) {
    now += 2 * kSilence;
    machine.on_request(now);  // failover
  }
  ASSERT_EQ(machine.state(), state);
}

TEST(KvstorePair, AnyTwoStatesSettleOnExactlyOneActiveByHeartbeatsAlone) {
  for (const PairState p : {PairState::kPrimary, PairState::kActive, PairState::kPassive}) {
    for (const PairState b : {PairState::kBackup, PairState::kActive, PairState::kPassive}) {
      for (const bool primary_first : {true, false}) {
        auto now = PairMachine::Clock::now();
        PairMachine primary{true, kSilence, now};
        PairMachine backup{false, kSilence, now};
        reach(primary, p, now);
        reach(backup, b, now);
        for (int round = 0; round < 3; ++round) {
          if (primary_first) {
            backup.on_peer(primary.state(), now);
            primary.on_peer(backup.state(), now);
          } else {
            primary.on_peer(backup.state(), now);
            backup.on_peer(primary.state(), now);
          }
        }
        SCOPED_TRACE(std::string(name(p)) + " / " + std::string(name(b)) + (primary_first ? ", primary first" : ""));
        EXPECT_EQ(primary.active() + backup.active(), 1);
        EXPECT_TRUE(primary.state() == PairState::kPassive || backup.state() == PairState::kPassive);
        // Where both were active, the primary stays: the backup yields.
        if (p == PairState::kActive && b == PairState::kActive) {
          EXPECT_TRUE(primary.active());
        }
      }
    }
  }
}

TEST(KvstorePair, StateNamesRoundTrip) {
  for (const PairState state : {PairState::kPrimary, PairState::kBackup, PairState::kActive, PairState::kPassive}) {
    EXPECT_EQ(sectorflow::kvstore::parse_pair_state(name(state)), state);
  }
  EXPECT_FALSE(sectorflow::kvstore::parse_pair_state("Active").has_value());
  EXPECT_FALSE(sectorflow::kvstore::parse_pair_state("").has_value());
}

}  // namespace
