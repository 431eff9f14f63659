#pragma once
// Whose traffic a database call is, so that the connection pool can keep connections for the
// control plane: a user who lists thousands of runs or follows many logs at once must not make
// the scheduler's writes (attempts, node state, leases' changes) wait for a connection.
//
// Calls are control traffic unless the thread says otherwise: the services' own loops
// (scheduling cycle, health sweeps) are control; `Serve` marks the handling of a call from a
// user or admin key as user traffic, and a call from a system key (a worker, another service)
// as control traffic.

namespace tessera::store {

enum class TrafficClass { kControl, kUser };

inline thread_local TrafficClass current_traffic_class = TrafficClass::kControl;

// Marks this thread's database calls as `c` until the scope ends.
class TrafficScope {
 public:
  explicit TrafficScope(TrafficClass c) : previous_(current_traffic_class) {
    current_traffic_class = c;
  }
  ~TrafficScope() { current_traffic_class = previous_; }
  TrafficScope(const TrafficScope&) = delete;
  TrafficScope& operator=(const TrafficScope&) = delete;

 private:
  TrafficClass previous_;
};

}  // namespace tessera::store
