//! The system under real mode: the few Linux system calls std does not
//! wrap (AF_PACKET sockets, `setns`, `ppoll`, a real-time scheduling
//! class; they live in `syscalls.rs`, which with [`frame_send`] (frames
//! sent on a packet socket) is the only module of pepkit that allows
//! `unsafe`, and are re-exported here), the system tools ([`command`]:
//! `ip`, `ethtool`, `sysctl`, `nft`, each under a time limit), child
//! processes under `timeout` ([`Process`]), Ctrl-C and SIGTERM
//! ([`interrupt`]) and the run's clock ([`RealClock`]).

mod clock;
pub mod command;
pub mod frame_send;
pub mod interrupt;
mod process;
mod syscalls;

pub use clock::{Anchor, RealClock};
pub use process::{Finished, Process};
pub use syscalls::{
    MAX_SEGMENTS, PacketSocket, PacketSocketStats, PollFd, RecvBatch, SendBatch, enter_netns,
    interface_index, pin_thread, poll, send_signal, set_realtime, thread_cpu_time, thread_cpus,
    udp_recv_batch, udp_send_batch, udp_send_segments, udp_steered_by_cid,
};
