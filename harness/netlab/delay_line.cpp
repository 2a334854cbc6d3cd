// delay_line: the WAN of the network-namespace test bed (harness/netlab, README "Testing many
// hosts"). This kernel has no netem, so delay and loss come from here: two TUN devices (layer 3,
// no packet-info header) whose packets are moved across, each after a fixed one-way delay, a
// seeded fraction dropped. TCP runs end to end through it and so sees the real round trip; this is
// not a proxy. The wrapper (harness/netlab/delay_line.py) moves each TUN into its own router
// namespace once this program has printed "ready".
//
// One thread per direction: poll the source, read a batch, stamp each packet with its release
// time and queue it in a ring of fixed slots; write every packet whose time has come to the other
// device. The delay is constant, so the ring is a FIFO and stays ordered.
//
// Control: SIGUSR1 takes the link down (every packet read is dropped and counted as such),
// SIGUSR2 brings it up; SIGTERM/SIGINT stop after the packets in flight have been released.
// At exit one JSON line of counters goes to stdout: nothing is dropped without being counted.

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};
std::atomic<bool> g_down{false};
static_assert(std::atomic<bool>::is_always_lock_free, "flags are set from signal handlers");

extern "C" void on_stop(int) { g_stop.store(true); }
extern "C" void on_down(int) { g_down.store(true); }
extern "C" void on_up(int) { g_down.store(false); }

struct Options {
    std::string tun_a;
    std::string tun_b;
    double delay_ms = 0.0;      // one way, each direction
    double loss = 0.0;          // fraction of packets dropped, each direction
    std::uint64_t seed = 1;
    double max_run_s = 600.0;   // the program exits by itself after this
    std::size_t ring_mb = 32;   // per direction: packets in flight, at most this many MiB of MTU-sized slots
    std::size_t mtu = 65535;

    // At 32 MiB a 30 ms one-way delay still carries about 1 GB/s; beyond, drops are counted (ring full).
    std::size_t ring_packets() const { return std::max<std::size_t>(1, (ring_mb << 20) / mtu); }
};

[[noreturn]] void usage(const char* why, int code = 2) {
    std::fprintf(code == 0 ? stdout : stderr,
                 "delay_line: %s\n"
                 "usage: delay_line --tun-a NAME --tun-b NAME [--delay-ms MS] [--loss FRACTION] [--seed N]\n"
                 "                  [--max-run-s S] [--ring-mb MIB] [--mtu BYTES]\n"
                 "Moves packets between two TUN devices after MS milliseconds each way, dropping FRACTION\n"
                 "of them (seeded). SIGUSR1 = link down, SIGUSR2 = link up, SIGTERM = drain and exit.\n"
                 "Prints one JSON line of counters at exit.\n",
                 why);
    std::exit(code);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string key = argv[i];
        if (key == "--help" || key == "-h") usage("a packet-level delay line between two TUN devices", 0);
        if (i + 1 >= argc) usage(("missing value after " + key).c_str());
        const char* value = argv[++i];
        try {
            if (key == "--tun-a") o.tun_a = value;
            else if (key == "--tun-b") o.tun_b = value;
            else if (key == "--delay-ms") o.delay_ms = std::stod(value);
            else if (key == "--loss") o.loss = std::stod(value);
            else if (key == "--seed") o.seed = std::stoull(value);
            else if (key == "--max-run-s") o.max_run_s = std::stod(value);
            else if (key == "--ring-mb") o.ring_mb = std::stoull(value);
            else if (key == "--mtu") o.mtu = std::stoull(value);
            else usage(("unknown option " + key).c_str());
        } catch (const std::logic_error&) {
            usage(("bad value '" + std::string(value) + "' for " + key).c_str());
        }
    }
    if (o.tun_a.empty() || o.tun_b.empty()) usage("--tun-a and --tun-b are required");
    if (o.tun_a.size() >= IFNAMSIZ || o.tun_b.size() >= IFNAMSIZ) usage("a TUN name has at most 15 characters");
    if (o.delay_ms < 0 || o.loss < 0 || o.loss > 1) usage("--delay-ms must be >= 0 and --loss in [0, 1]");
    if (o.max_run_s <= 0 || o.ring_mb == 0 || o.mtu < 576 || o.mtu > 65535) usage("bad --max-run-s, --ring-mb or --mtu");
    return o;
}

// The open descriptor of one TUN device; closing it removes the device (it is not persistent).
class Tun {
public:
    explicit Tun(const std::string& name) : fd_(::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC)) {
        if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "open /dev/net/tun");
        ifreq request{};
        request.ifr_flags = IFF_TUN | IFF_NO_PI;
        std::strncpy(request.ifr_name, name.c_str(), IFNAMSIZ - 1);
        if (::ioctl(fd_, TUNSETIFF, &request) < 0) {
            const int error = errno;
            ::close(fd_);
            throw std::system_error(error, std::generic_category(), "TUNSETIFF " + name);
        }
    }
    ~Tun() { ::close(fd_); }
    Tun(const Tun&) = delete;
    Tun& operator=(const Tun&) = delete;
    int fd() const { return fd_; }

private:
    int fd_;
};

struct Counters {
    std::uint64_t read = 0;
    std::uint64_t forwarded = 0;
    std::uint64_t forwarded_bytes = 0;
    std::uint64_t dropped_loss = 0;
    std::uint64_t dropped_down = 0;
    std::uint64_t dropped_ring_full = 0;
    std::uint64_t write_errors = 0;
};

// One direction: packets from `from` reach `to` after the delay, unless dropped.
class Direction {
public:
    Direction(const Options& options, int from, int to, std::uint64_t seed)
        : from_(from), to_(to), slot_size_(options.mtu), delay_(std::chrono::duration_cast<Clock::duration>(
                                                               std::chrono::duration<double, std::milli>(options.delay_ms))),
          loss_(options.loss), rng_(seed), storage_(options.ring_packets() * options.mtu), length_(options.ring_packets()),
          release_(options.ring_packets()), scratch_(options.mtu) {}

    void run(Clock::time_point deadline) {
        bool draining = false;
        while (true) {
            const auto now = Clock::now();
            if (!draining && (g_stop.load() || now >= deadline)) draining = true;
            if (draining && (count_ == 0 || now >= deadline + delay_ + std::chrono::seconds(1))) break;
            release_due(now);
            int timeout_ms = 50;
            if (count_ > 0) {
                const auto wait = std::chrono::ceil<std::chrono::milliseconds>(release_[head_] - now).count();
                timeout_ms = static_cast<int>(std::clamp<long long>(wait, 0, 50));
            }
            if (draining) {
                // Stopping: nothing new is read; what is in flight still arrives on time.
                if (timeout_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
                continue;
            }
            pollfd readable{from_, POLLIN, 0};
            if (::poll(&readable, 1, timeout_ms) > 0 && (readable.revents & POLLIN)) read_batch();
        }
        // Past the hard deadline anything still queued is counted, never lost silently.
        counters.unreleased_at_exit = count_;
    }

    struct Totals : Counters {
        std::uint64_t unreleased_at_exit = 0;
    } counters;

private:
    static constexpr int kBatch = 64;

    void read_batch() {
        for (int i = 0; i < kBatch; ++i) {
            // A full ring still reads (into scratch) so that the drop is counted, not left to the kernel.
            const bool ring_full = count_ == length_.size();
            std::uint8_t* into = ring_full ? scratch_.data() : storage_.data() + tail_ * slot_size_;
            const ssize_t n = ::read(from_, into, slot_size_);
            if (n < 0) return;  // EAGAIN: read all there was
            ++counters.read;
            if (g_down.load()) {
                ++counters.dropped_down;
                continue;
            }
            if (loss_ > 0 && uniform_(rng_) < loss_) {
                ++counters.dropped_loss;
                continue;
            }
            if (ring_full) {
                ++counters.dropped_ring_full;
                continue;
            }
            length_[tail_] = static_cast<std::size_t>(n);
            release_[tail_] = Clock::now() + delay_;
            tail_ = (tail_ + 1) % length_.size();
            ++count_;
        }
    }

    void release_due(Clock::time_point now) {
        while (count_ > 0 && release_[head_] <= now) {
            const std::uint8_t* packet = storage_.data() + head_ * slot_size_;
            if (::write(to_, packet, length_[head_]) == static_cast<ssize_t>(length_[head_])) {
                ++counters.forwarded;
                counters.forwarded_bytes += length_[head_];
            } else {
                ++counters.write_errors;
            }
            head_ = (head_ + 1) % length_.size();
            --count_;
        }
    }

    int from_;
    int to_;
    std::size_t slot_size_;
    Clock::duration delay_;
    double loss_;
    std::mt19937_64 rng_;
    std::uniform_real_distribution<double> uniform_{0.0, 1.0};
    std::vector<std::uint8_t> storage_;
    std::vector<std::size_t> length_;
    std::vector<Clock::time_point> release_;
    std::vector<std::uint8_t> scratch_;
    std::size_t head_ = 0;
    std::size_t tail_ = 0;
    std::size_t count_ = 0;
};

void print_direction(const char* name, const Direction::Totals& c, bool last) {
    std::printf(
        "\"%s\": {\"read\": %llu, \"forwarded\": %llu, \"forwarded_bytes\": %llu, \"dropped_loss\": %llu, "
        "\"dropped_down\": %llu, \"dropped_ring_full\": %llu, \"write_errors\": %llu, \"unreleased_at_exit\": %llu}%s",
        name, static_cast<unsigned long long>(c.read), static_cast<unsigned long long>(c.forwarded),
        static_cast<unsigned long long>(c.forwarded_bytes), static_cast<unsigned long long>(c.dropped_loss),
        static_cast<unsigned long long>(c.dropped_down), static_cast<unsigned long long>(c.dropped_ring_full),
        static_cast<unsigned long long>(c.write_errors), static_cast<unsigned long long>(c.unreleased_at_exit),
        last ? "" : ", ");
}

}  // namespace

int main(int argc, char** argv) {
    const Options options = parse(argc, argv);
    std::signal(SIGTERM, on_stop);
    std::signal(SIGINT, on_stop);
    std::signal(SIGUSR1, on_down);
    std::signal(SIGUSR2, on_up);
    try {
        Tun a(options.tun_a);
        Tun b(options.tun_b);
        Direction a_to_b(options, a.fd(), b.fd(), options.seed);
        Direction b_to_a(options, b.fd(), a.fd(), options.seed ^ 0x9e3779b97f4a7c15ULL);
        std::printf("ready %s %s\n", options.tun_a.c_str(), options.tun_b.c_str());
        std::fflush(stdout);
        const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(options.max_run_s));
        std::thread forward([&] { a_to_b.run(deadline); });
        b_to_a.run(deadline);
        forward.join();
        std::printf("{");
        print_direction("a_to_b", a_to_b.counters, false);
        print_direction("b_to_a", b_to_a.counters, true);
        std::printf("}\n");
        std::fflush(stdout);
    } catch (const std::exception& error) {
        std::fprintf(stderr, "delay_line: %s\n", error.what());
        return 1;
    }
    return 0;
}
