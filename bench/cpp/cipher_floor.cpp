// The cipher's own cost, the floor of an encrypted hop (bench/transport.py runs it):
//
//   cipher_floor --bytes B --messages N --repeats R
//
// CurveZMQ encrypts every message of an established connection with libsodium's
// crypto_box_*_afternm (XSalsa20-Poly1305 under the key both ends computed at the handshake), in
// the ZeroMQ I/O thread of the sender, and the receiver's I/O thread opens it. This program does
// only that, on one thread (one core): N messages of B bytes sealed with crypto_box_easy_afternm,
// then each opened (and checked) with crypto_box_open_easy_afternm, a fresh nonce per message as
// CurveZMQ uses, R times. The CPU clock is the thread's own, so other tenants of the machine cost
// it cache and frequency but not their time slices; of the R repetitions the cheapest counts (the
// least disturbed). Prints one JSON line: {"bytes", "messages", "repeats", "seal_cpu_s_per_gb",
// "open_cpu_s_per_gb", "seal_gb_s", "open_gb_s"}: CPU seconds per GB of payload, and GB of payload
// per CPU second of the one core. Errors are one line on stderr and exit code 2.
#include <sodium.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

double thread_cpu_s() {
  timespec now{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) != 0) throw std::runtime_error("clock_gettime failed");
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

std::uint64_t option(int argc, char** argv, const std::string& name) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (argv[i] == name) {
      const std::uint64_t value = std::stoull(argv[i + 1]);
      if (value == 0) throw std::runtime_error(name + " must be at least 1");
      return value;
    }
  }
  throw std::runtime_error("missing " + name + " (see the comment at the top of cipher_floor.cpp)");
}

struct Floor {
  double seal_s = std::numeric_limits<double>::infinity();  // CPU seconds for all messages, cheapest repetition
  double open_s = std::numeric_limits<double>::infinity();
};

Floor measure(std::size_t bytes, std::uint64_t messages, std::uint64_t repeats) {
  unsigned char sender_public[crypto_box_PUBLICKEYBYTES];
  unsigned char sender_secret[crypto_box_SECRETKEYBYTES];
  unsigned char receiver_public[crypto_box_PUBLICKEYBYTES];
  unsigned char receiver_secret[crypto_box_SECRETKEYBYTES];
  crypto_box_keypair(sender_public, sender_secret);
  crypto_box_keypair(receiver_public, receiver_secret);
  unsigned char seal_key[crypto_box_BEFORENMBYTES];
  unsigned char open_key[crypto_box_BEFORENMBYTES];
  if (crypto_box_beforenm(seal_key, receiver_public, sender_secret) != 0 ||
      crypto_box_beforenm(open_key, sender_public, receiver_secret) != 0) {
    throw std::runtime_error("crypto_box_beforenm refused the keys");
  }

  std::vector<unsigned char> plain(bytes);
  randombytes_buf(plain.data(), plain.size());
  // One sealed buffer per message, so that opening reads what sealing wrote as a receiver would
  // (not one buffer hot in the cache); a few of them cycle to keep memory small.
  constexpr std::size_t kBuffers = 64;
  std::vector<std::vector<unsigned char>> sealed(kBuffers, std::vector<unsigned char>(bytes + crypto_box_MACBYTES));
  std::vector<std::vector<unsigned char>> nonces(kBuffers, std::vector<unsigned char>(crypto_box_NONCEBYTES, 0));
  std::vector<unsigned char> opened(bytes);

  Floor best;
  std::vector<unsigned char> nonce(crypto_box_NONCEBYTES, 0);
  for (std::uint64_t r = 0; r < repeats; ++r) {
    double seal_s = 0.0;
    double open_s = 0.0;
    for (std::uint64_t done = 0; done < messages; done += kBuffers) {
      const std::size_t batch = static_cast<std::size_t>(std::min<std::uint64_t>(kBuffers, messages - done));
      double start = thread_cpu_s();
      for (std::size_t i = 0; i < batch; ++i) {
        sodium_increment(nonce.data(), nonce.size());
        nonces[i] = nonce;
        crypto_box_easy_afternm(sealed[i].data(), plain.data(), plain.size(), nonces[i].data(), seal_key);
      }
      seal_s += thread_cpu_s() - start;
      start = thread_cpu_s();
      for (std::size_t i = 0; i < batch; ++i) {
        if (crypto_box_open_easy_afternm(opened.data(), sealed[i].data(), sealed[i].size(), nonces[i].data(),
                                         open_key) != 0) {
          throw std::runtime_error("a sealed message failed to open: the measurement is wrong");
        }
      }
      open_s += thread_cpu_s() - start;
    }
    best.seal_s = std::min(best.seal_s, seal_s);
    best.open_s = std::min(best.open_s, open_s);
  }
  if (opened != plain) throw std::runtime_error("an opened message differs from the plain one");
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (sodium_init() < 0) throw std::runtime_error("sodium_init failed");
    const std::uint64_t bytes = option(argc, argv, "--bytes");
    const std::uint64_t messages = option(argc, argv, "--messages");
    const std::uint64_t repeats = option(argc, argv, "--repeats");
    const Floor floor = measure(static_cast<std::size_t>(bytes), messages, repeats);
    const double gb = static_cast<double>(bytes) * static_cast<double>(messages) / 1e9;
    std::printf("{\"bytes\": %llu, \"messages\": %llu, \"repeats\": %llu, \"seal_cpu_s_per_gb\": %.6f, "
                "\"open_cpu_s_per_gb\": %.6f, \"seal_gb_s\": %.6f, \"open_gb_s\": %.6f}\n",
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(messages),
                static_cast<unsigned long long>(repeats), floor.seal_s / gb, floor.open_s / gb, gb / floor.seal_s,
                gb / floor.open_s);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cipher_floor: error: %s\n", e.what());
    return 2;
  }
}
