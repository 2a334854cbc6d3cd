#include "sectorflow/kvstore/pair_state.hpp"

namespace sectorflow::kvstore {

namespace {

using S = PairState;
constexpr bool kServe = true;
constexpr bool kRefuse = false;

// on_peer() maps a peer's state to its event by position.
static_assert(static_cast<int>(PairEvent::kPeerPrimary) == static_cast<int>(PairState::kPrimary) &&
              static_cast<int>(PairEvent::kPeerBackup) == static_cast<int>(PairState::kBackup) &&
              static_cast<int>(PairEvent::kPeerActive) == static_cast<int>(PairState::kActive) &&
              static_cast<int>(PairEvent::kPeerPassive) == static_cast<int>(PairState::kPassive));

constexpr std::string_view kBothPrimary =
    "the peer says it is the primary too: one of the pair must be configured as the backup";
constexpr std::string_view kBothBackup =
    "the peer says it is the backup too: one of the pair must be configured as the primary";

}  // namespace

// Columns: peer primary, peer backup, peer active, peer passive, request (peer alive), request (peer silent).
const std::array<std::array<PairStep, kPairEvents>, kPairStates> kPairTable = {{
    // kPrimary: started, waiting to hear the backup.
    {{{S::kPrimary, S::kPrimary, kRefuse, kBothPrimary},
      {S::kActive, S::kActive, kRefuse, "the backup is up and waits: active"},
      {S::kPassive, S::kPassive, kRefuse, "the backup is active: passive, mirroring it"},
      {S::kPrimary, S::kPrimary, kRefuse, ""},  // the passive backup goes active on hearing a primary start
      {S::kPrimary, S::kPrimary, kRefuse,
       "a client asked, but the backup may be active (it was heard lately): not serving yet"},
      {S::kActive, S::kActive, kServe, "a client asked and the backup is silent: active"}}},
    // kBackup: started, waiting to hear the primary. It serves only once it has been passive.
    {{{S::kBackup, S::kBackup, kRefuse, ""},  // the primary goes active on hearing the backup
      {S::kBackup, S::kBackup, kRefuse, kBothBackup},
      {S::kPassive, S::kPassive, kRefuse, "the primary is active: passive, mirroring it"},
      {S::kBackup, S::kBackup, kRefuse, ""},  // the passive primary goes active on hearing a backup start
      {S::kBackup, S::kBackup, kRefuse, "a client asked, but the backup serves only after mirroring an active"},
      {S::kBackup, S::kBackup, kRefuse, "a client asked, but the backup serves only after mirroring an active"}}},
    // kActive: takes writes, answers snapshots, publishes. Only death (or a split) ends it.
    {{{S::kActive, S::kActive, kRefuse, ""},  // the restarted peer goes passive on hearing us
      {S::kActive, S::kActive, kRefuse, ""},
      {S::kActive, S::kPassive, kRefuse,
       "two actives (the peer link was cut while clients asked both): the backup yields and resyncs from "
       "the primary; what the backup took alone since the split is lost"},
      {S::kActive, S::kActive, kRefuse, ""},
      {S::kActive, S::kActive, kServe, ""},
      {S::kActive, S::kActive, kServe, ""}}},
    // kPassive: mirrors the active; holds clients' writes as pending until the active publishes them.
    {{{S::kActive, S::kActive, kRefuse, "the primary restarts: active"},
      {S::kActive, S::kActive, kRefuse, "the backup restarts: active"},
      {S::kPassive, S::kPassive, kRefuse, ""},
      {S::kActive, S::kPassive, kRefuse, "two passives: the primary takes over"},
      {S::kPassive, S::kPassive, kRefuse, ""},  // the active lives: its clients will come back to it
      {S::kActive, S::kActive, kServe, "failover: the active is silent and a client asked: active"}}},
}};

std::string_view name(PairState state) {
  switch (state) {
    case PairState::kPrimary: return "primary";
    case PairState::kBackup: return "backup";
    case PairState::kActive: return "active";
    case PairState::kPassive: return "passive";
  }
  return "?";
}

std::string_view name(PairEvent event) {
  switch (event) {
    case PairEvent::kPeerPrimary: return "peer primary";
    case PairEvent::kPeerBackup: return "peer backup";
    case PairEvent::kPeerActive: return "peer active";
    case PairEvent::kPeerPassive: return "peer passive";
    case PairEvent::kRequestPeerAlive: return "request, peer alive";
    case PairEvent::kRequestPeerSilent: return "request, peer silent";
  }
  return "?";
}

std::optional<PairState> parse_pair_state(std::string_view text) {
  for (const PairState state : {PairState::kPrimary, PairState::kBackup, PairState::kActive, PairState::kPassive}) {
    if (text == name(state)) return state;
  }
  return std::nullopt;
}

PairMachine::PairMachine(bool primary, Clock::duration silence, Clock::time_point start)
    : primary_(primary),
      silence_(silence),
      state_(primary ? PairState::kPrimary : PairState::kBackup),
      peer_expiry_(start + silence) {}

bool PairMachine::peer_alive(Clock::time_point now) const { return now < peer_expiry_; }

PairMachine::Outcome PairMachine::on_peer(PairState peer, Clock::time_point now) {
  peer_expiry_ = now + silence_;
  // The events begin with the peer's states, in the same order.
  return apply(static_cast<PairEvent>(static_cast<int>(peer)));
}

PairMachine::Outcome PairMachine::on_request(Clock::time_point now) {
  return apply(peer_alive(now) ? PairEvent::kRequestPeerAlive : PairEvent::kRequestPeerSilent);
}

PairMachine::Outcome PairMachine::apply(PairEvent event) {
  const PairStep& step = kPairTable[static_cast<std::size_t>(state_)][static_cast<std::size_t>(event)];
  const PairState before = state_;
  state_ = primary_ ? step.primary : step.backup;
  return {event, before, state_, step.serve, step.why};
}

}  // namespace sectorflow::kvstore
