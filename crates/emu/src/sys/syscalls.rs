//! The few Linux system calls real mode needs that std and socket2 do not
//! wrap: AF_PACKET and UDP sockets with batched receive and send
//! (`recvmmsg`, `sendmmsg`), `setns` into a named network namespace, `ppoll` with a
//! nanosecond timeout, a real-time scheduling class for the relay, and
//! CPU affinity (a middle node's thread on a core of its own).
//!
//! With `frame_send.rs`, the only module of pepkit that allows `unsafe`. Each block
//! wraps one system call whose arguments are built from owned Rust values
//! that outlive the call; errors come back as `io::Error`.
#![allow(unsafe_code)]

mod steer;

pub use steer::{MAX_SEGMENTS, udp_send_segments, udp_steered_by_cid};

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// `ETH_P_ALL` in network byte order, as `socket` and `bind` want it.
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();
/// `SO_TIMESTAMPNS` (and `SCM_TIMESTAMPNS`) on targets with a 64-bit
/// `time_t`, where the kernel's "old" option already carries 64-bit
/// seconds.
const SO_TIMESTAMPNS: libc::c_int = 35;
/// Control-message room per received frame: one `cmsghdr` and one
/// `timespec` (32 bytes on 64-bit Linux), rounded up, 8-byte aligned.
const CONTROL_WORDS: usize = 8;

/// Converts a `-1` return into the thread's `errno`.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The index of the interface called `name` in the current network
/// namespace.
pub fn interface_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::other("interface name contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string for the whole call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {name}: {}", io::Error::last_os_error()),
        ))
    } else {
        Ok(index)
    }
}

/// Moves the calling thread into the network namespace `name` (as made by
/// `ip netns add`, i.e. `/run/netns/NAME`). Sockets the thread opens
/// afterwards belong to that namespace.
pub fn enter_netns(name: &str) -> io::Result<()> {
    let file = File::open(format!("/run/netns/{name}"))
        .map_err(|e| io::Error::new(e.kind(), format!("network namespace {name}: {e}")))?;
    // SAFETY: `file` is an open namespace file descriptor for the call.
    check(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) })?;
    Ok(())
}

/// Puts the calling thread in the `SCHED_FIFO` class at `priority` (1–99),
/// so its timer wake-ups are not delayed behind ordinary threads. The
/// kernel's real-time throttling still reserves CPU for everything else.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` lives for the call; pid 0 is the calling thread.
    check(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) })?;
    Ok(())
}

/// The CPUs the calling thread may run on (its affinity), in order.
pub fn thread_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed `cpu_set_t` is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed.
    check(unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) })?;
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below `CPU_SETSIZE`, the set's capacity.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Lets the calling thread run only on `cpus` (threads and processes it
/// starts afterwards inherit that).
pub fn pin_thread(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: a zeroed `cpu_set_t` is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond the kernel's CPU sets"),
            ));
        }
        // SAFETY: `cpu` is below `CPU_SETSIZE`, the set's capacity.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid `cpu_set_t` of the size passed.
    check(unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) })?;
    Ok(())
}

/// What `poll` should wait for on one descriptor, and what it found.
#[derive(Clone, Copy, Debug)]
pub struct PollFd {
    fd: RawFd,
    /// Readable (`POLLIN`) after the call.
    pub readable: bool,
    /// Writable (`POLLOUT`) after the call.
    pub writable: bool,
    want_write: bool,
}

impl PollFd {
    /// Waits for `fd` to become readable.
    pub fn readable(fd: BorrowedFd<'_>) -> PollFd {
        PollFd {
            fd: fd.as_raw_fd(),
            readable: false,
            writable: false,
            want_write: false,
        }
    }

    /// Waits for `fd` to become readable or writable.
    pub fn read_write(fd: BorrowedFd<'_>) -> PollFd {
        PollFd {
            want_write: true,
            ..PollFd::readable(fd)
        }
    }
}

/// Waits until one of `fds` is ready or `timeout` passes (`None`: no
/// limit), with nanosecond resolution (`ppoll`). Returns how many are
/// ready; an interrupted call returns 0.
pub fn poll(fds: &mut [PollFd], timeout: Option<Duration>) -> io::Result<usize> {
    let mut raw: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.fd,
            events: libc::POLLIN | if f.want_write { libc::POLLOUT } else { 0 },
            revents: 0,
        })
        .collect();
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `raw` and `ts` outlive the call; the length matches.
    let ret = unsafe {
        libc::ppoll(
            raw.as_mut_ptr(),
            raw.len() as libc::nfds_t,
            ts_ptr,
            std::ptr::null(),
        )
    };
    if ret < 0 {
        let error = io::Error::last_os_error();
        if error.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(error);
    }
    for (f, r) in fds.iter_mut().zip(&raw) {
        f.readable = r.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0;
        f.writable = r.revents & libc::POLLOUT != 0;
    }
    Ok(ret as usize)
}

/// Kernel counters of a packet socket (`PACKET_STATISTICS`), since the
/// last time they were read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketSocketStats {
    /// Frames the socket received.
    pub packets: u64,
    /// Frames the kernel dropped because the socket's buffer was full.
    pub drops: u64,
}

/// An `AF_PACKET` raw socket bound to one interface, seeing every frame
/// that arrives on it (not those it sends), non-blocking.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    interface: String,
}

impl PacketSocket {
    /// Opens a socket on interface `name` of the current network
    /// namespace, with receive and send buffers of `buffer` bytes.
    pub fn bind(name: &str, buffer: usize) -> io::Result<PacketSocket> {
        let index = interface_index(name)?;
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::c_int::from(ETH_P_ALL_BE),
            )
        })
        .map_err(|e| io::Error::new(e.kind(), format!("AF_PACKET socket: {e} (needs root)")))?;
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let socket = PacketSocket {
            fd,
            interface: name.to_string(),
        };
        socket.set_int(libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)?;
        let size = libc::c_int::try_from(buffer).unwrap_or(libc::c_int::MAX);
        // The FORCE variants exceed the sysctl limits (we are root); fall
        // back to the plain ones otherwise.
        for (force, plain) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            if socket.set_int(libc::SOL_SOCKET, force, size).is_err() {
                socket.set_int(libc::SOL_SOCKET, plain, size)?;
            }
        }
        // SAFETY: an all-zero sockaddr_ll is valid; the fields are set below.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = ETH_P_ALL_BE;
        addr.sll_ifindex = index as i32;
        // SAFETY: `addr` is a valid sockaddr_ll of the given length.
        check(unsafe {
            libc::bind(
                socket.fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        // Frames queued before the bind may come from any interface:
        // drain them so everything read later is this interface's.
        let mut scratch = RecvBatch::new(64, 64);
        while socket.recv_batch(&mut scratch)? > 0 {}
        Ok(socket)
    }

    /// Has the kernel stamp every frame this socket receives with its
    /// arrival time (`SO_TIMESTAMPNS`, read by [`RecvBatch::stamps`]):
    /// when the frame entered this host's receive path, not when a
    /// possibly preempted reader got to it.
    pub fn stamp_arrivals(&self) -> io::Result<()> {
        self.set_int(libc::SOL_SOCKET, SO_TIMESTAMPNS, 1)
    }

    /// The interface's name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    fn set_int(&self, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
        set_int_option(self.fd.as_fd(), level, name, value)
    }

    /// Receives up to `batch.capacity()` frames without blocking
    /// (`recvmmsg`); returns how many (0 if none is waiting).
    pub fn recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        // MSG_TRUNC makes each length the frame's real length.
        recv_mmsg(self.fd.as_fd(), batch, libc::MSG_TRUNC)
    }

    /// Sends frames out of the interface (`sendmmsg`); returns how many
    /// the kernel took (fewer when its queue is full).
    pub fn send_batch(&self, frames: &[&[u8]]) -> io::Result<usize> {
        let mut batch = SendBatch::new(frames.len());
        send_mmsg(self.fd.as_fd(), frames, None, &mut batch)
    }

    /// [`Self::send_batch`] with reusable headers (no allocation).
    pub fn send_frames(&self, frames: &[Vec<u8>], batch: &mut SendBatch) -> io::Result<usize> {
        send_mmsg(self.fd.as_fd(), frames, None, batch)
    }

    /// Reads (and resets) the kernel's counters for this socket.
    pub fn take_stats(&self) -> io::Result<PacketSocketStats> {
        // SAFETY: an all-zero tpacket_stats is valid.
        let mut stats: libc::tpacket_stats = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `stats` and `len` live for the call and match.
        check(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut stats as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        })?;
        Ok(PacketSocketStats {
            packets: u64::from(stats.tp_packets),
            drops: u64::from(stats.tp_drops),
        })
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Reusable headers for `sendmmsg` ([`PacketSocket::send_frames`],
/// [`udp_send_batch`]).
pub struct SendBatch {
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    names: Vec<libc::sockaddr_storage>,
}

// SAFETY: the raw pointers in `iovecs` and `headers` are rebuilt before
// every use and point only into data borrowed for that call.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// Room for `count` messages a call (more are sent in several calls).
    pub fn new(count: usize) -> SendBatch {
        SendBatch {
            iovecs: Vec::with_capacity(count),
            headers: Vec::with_capacity(count),
            names: Vec::with_capacity(count),
        }
    }
}

/// A socket address as the kernel takes it, with its length.
fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is larger than and aligned for
            // sockaddr_in.
            let sin = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_flowinfo = v6.flowinfo();
            sin6.sin6_scope_id = v6.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The socket address in `storage`, if it is an IPv4 or IPv6 one.
fn socket_addr(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(storage as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(storage as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Sets an integer socket option (`setsockopt`).
pub(super) fn set_int_option(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` is a c_int that lives for the call.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// `sendmmsg` of `messages` on `fd`, to `dsts` (one per message) or to
/// where the socket is bound; returns how many the kernel took (0 when
/// its buffer is full).
pub(super) fn send_mmsg<B: AsRef<[u8]>>(
    fd: BorrowedFd<'_>,
    messages: &[B],
    dsts: Option<&[SocketAddr]>,
    batch: &mut SendBatch,
) -> io::Result<usize> {
    if messages.is_empty() {
        return Ok(0);
    }
    batch.iovecs.clear();
    batch.headers.clear();
    batch.names.clear();
    for message in messages {
        let bytes = message.as_ref();
        batch.iovecs.push(libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        });
    }
    let mut lens = Vec::new();
    if let Some(dsts) = dsts {
        for &dst in dsts.iter().take(messages.len()) {
            let (name, len) = sockaddr(dst);
            batch.names.push(name);
            lens.push(len);
        }
    }
    for (i, iov) in batch.iovecs.iter_mut().enumerate() {
        // SAFETY: an all-zero mmsghdr is valid (no name, no control).
        let mut header: libc::mmsghdr = unsafe { std::mem::zeroed() };
        header.msg_hdr.msg_iov = iov;
        header.msg_hdr.msg_iovlen = 1;
        if let (Some(name), Some(&len)) = (batch.names.get_mut(i), lens.get(i)) {
            header.msg_hdr.msg_name = (name as *mut libc::sockaddr_storage).cast();
            header.msg_hdr.msg_namelen = len;
        }
        batch.headers.push(header);
    }
    // SAFETY: the headers point at iovecs and names in `batch` and the
    // iovecs at `messages`, all alive and unmoved for the call; the kernel
    // only reads them.
    let ret = unsafe {
        libc::sendmmsg(
            fd.as_raw_fd(),
            batch.headers.as_mut_ptr(),
            batch.headers.len() as libc::c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    if ret < 0 {
        let error = io::Error::last_os_error();
        return match error.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
            _ => Err(error),
        };
    }
    Ok(ret as usize)
}

/// Sends datagrams from a UDP socket, each to its destination, with one
/// `sendmmsg`; returns how many the kernel took (0 when the socket's
/// buffer is full).
pub fn udp_send_batch(
    socket: &UdpSocket,
    payloads: &[&[u8]],
    dsts: &[SocketAddr],
    batch: &mut SendBatch,
) -> io::Result<usize> {
    let n = payloads.len().min(dsts.len());
    send_mmsg(socket.as_fd(), &payloads[..n], Some(&dsts[..n]), batch)
}

/// Receives up to `batch.capacity()` datagrams from a non-blocking UDP
/// socket with one `recvmmsg`; returns how many (0 if none is waiting).
/// [`RecvBatch::source`] gives each one's sender.
pub fn udp_recv_batch(socket: &UdpSocket, batch: &mut RecvBatch) -> io::Result<usize> {
    recv_mmsg(socket.as_fd(), batch, 0)
}

/// `recvmmsg` on `fd` into `batch`, without blocking.
fn recv_mmsg(fd: BorrowedFd<'_>, batch: &mut RecvBatch, flags: libc::c_int) -> io::Result<usize> {
    batch.prepare();
    // SAFETY: every msghdr points at a name, an iovec, a buffer and a
    // control buffer in `batch`, which outlive the call; vlen matches the
    // array.
    let ret = unsafe {
        libc::recvmmsg(
            fd.as_raw_fd(),
            batch.headers.as_mut_ptr(),
            batch.headers.len() as libc::c_uint,
            libc::MSG_DONTWAIT | flags,
            std::ptr::null_mut(),
        )
    };
    if ret < 0 {
        let error = io::Error::last_os_error();
        return match error.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
            _ => Err(error),
        };
    }
    let n = ret as usize;
    batch.filled = n;
    for i in 0..n {
        batch.lens[i] = batch.headers[i].msg_len as usize;
        batch.stamps[i] = arrival_stamp(&batch.headers[i].msg_hdr);
    }
    Ok(n)
}

/// Reusable buffers for [`PacketSocket::recv_batch`].
pub struct RecvBatch {
    buffers: Vec<Vec<u8>>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    controls: Vec<[u64; CONTROL_WORDS]>,
    names: Vec<libc::sockaddr_storage>,
    lens: Vec<usize>,
    stamps: Vec<Option<Duration>>,
    filled: usize,
}

/// The `SCM_TIMESTAMPNS` stamp among a received message's control
/// messages, as real time (since the Unix epoch).
fn arrival_stamp(header: &libc::msghdr) -> Option<Duration> {
    // SAFETY: `header` was filled by recvmmsg: its control pointer and
    // length describe the batch's control buffer for this message, and
    // the CMSG macros stay within them.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(header);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == SO_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                return Some(Duration::new(
                    u64::try_from(ts.tv_sec).ok()?,
                    u32::try_from(ts.tv_nsec).ok()?,
                ));
            }
            cmsg = libc::CMSG_NXTHDR(header, cmsg);
        }
    }
    None
}

// SAFETY: the raw pointers in `iovecs` and `headers` point only into
// `buffers` and `iovecs`, which move with the struct (their heap storage
// does not), and are rebuilt before every use.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// Room for `count` frames of up to `frame_len` bytes each (longer
    /// frames are truncated; their real length is still reported).
    pub fn new(count: usize, frame_len: usize) -> RecvBatch {
        let count = count.max(1);
        RecvBatch {
            buffers: vec![vec![0u8; frame_len]; count],
            iovecs: Vec::with_capacity(count),
            // SAFETY: an all-zero mmsghdr is valid.
            headers: (0..count).map(|_| unsafe { std::mem::zeroed() }).collect(),
            controls: vec![[0; CONTROL_WORDS]; count],
            // SAFETY: an all-zero sockaddr_storage is valid.
            names: (0..count).map(|_| unsafe { std::mem::zeroed() }).collect(),
            lens: vec![0; count],
            stamps: vec![None; count],
            filled: 0,
        }
    }

    /// How many frames one call can receive.
    pub fn capacity(&self) -> usize {
        self.buffers.len()
    }

    fn prepare(&mut self) {
        self.filled = 0;
        self.iovecs.clear();
        for buffer in &mut self.buffers {
            self.iovecs.push(libc::iovec {
                iov_base: buffer.as_mut_ptr().cast(),
                iov_len: buffer.len(),
            });
        }
        for (((header, iov), control), name) in self
            .headers
            .iter_mut()
            .zip(self.iovecs.iter_mut())
            .zip(self.controls.iter_mut())
            .zip(self.names.iter_mut())
        {
            // SAFETY: an all-zero mmsghdr is valid.
            *header = unsafe { std::mem::zeroed() };
            header.msg_hdr.msg_iov = iov;
            header.msg_hdr.msg_iovlen = 1;
            header.msg_hdr.msg_control = control.as_mut_ptr().cast();
            header.msg_hdr.msg_controllen = std::mem::size_of_val(control);
            header.msg_hdr.msg_name = (name as *mut libc::sockaddr_storage).cast();
            header.msg_hdr.msg_namelen = std::mem::size_of_val(name) as libc::socklen_t;
        }
    }

    /// The frames of the last receive: each frame's bytes (truncated to
    /// the buffer) and its real length.
    pub fn frames(&self) -> impl Iterator<Item = (&[u8], usize)> {
        (0..self.filled).map(|i| self.frame(i))
    }

    /// The sender of message `index` of the last receive, for a UDP
    /// socket ([`udp_recv_batch`]).
    pub fn source(&self, index: usize) -> Option<SocketAddr> {
        socket_addr(&self.names[index])
    }

    /// Forgets the last receive's frames.
    pub fn clear(&mut self) {
        self.filled = 0;
    }

    /// Frame `index` of the last receive, as [`Self::frames`] gives it.
    pub fn frame(&self, index: usize) -> (&[u8], usize) {
        let len = self.lens[index];
        (
            &self.buffers[index][..len.min(self.buffers[index].len())],
            len,
        )
    }

    /// The frames' arrival stamps of the last receive, in real time since
    /// the Unix epoch (`None` unless the socket stamps them:
    /// [`PacketSocket::stamp_arrivals`]); one per frame of [`Self::frames`].
    pub fn stamps(&self) -> &[Option<Duration>] {
        &self.stamps[..self.filled]
    }
}

/// Sends signal `signal` (e.g. `libc::SIGTERM`) to process `pid`, or to
/// its whole process group if `group`.
pub fn send_signal(pid: u32, signal: libc::c_int, group: bool) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    let pid = if group { -pid } else { pid };
    // SAFETY: kill(2) takes plain integers.
    check(unsafe { libc::kill(pid, signal) })?;
    Ok(())
}

// ---------------------------------------------------------------------------
// Added for the Sidekick proxy's capacity measurement (`bench::proxy_capacity`).
// ---------------------------------------------------------------------------

/// The CPU time the calling thread has used (user and system,
/// `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`), with nanosecond resolution.
pub fn thread_cpu_time() -> io::Result<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec that lives for the call.
    check(unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) })?;
    Ok(Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU the calling thread is running on.
    fn current_cpu() -> io::Result<usize> {
        // SAFETY: no arguments; returns the CPU or -1 with errno.
        let cpu = check(unsafe { libc::sched_getcpu() })?;
        Ok(cpu as usize)
    }

    /// A batch sent with `sendmmsg` arrives whole and in order through
    /// `recvmmsg`, each datagram with its sender's address.
    #[test]
    fn udp_batches_carry_payloads_and_addresses() {
        let a = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let b = UdpSocket::bind("127.0.0.1:0").expect("bind");
        b.set_nonblocking(true).expect("non-blocking");
        let to = b.local_addr().expect("address");
        let payloads: [&[u8]; 3] = [b"one", b"two two", b"three three three"];
        let mut send = SendBatch::new(2);
        let sent = udp_send_batch(&a, &payloads, &[to; 3], &mut send).expect("send");
        assert_eq!(sent, 3);
        let mut batch = RecvBatch::new(8, 64);
        let mut got = Vec::new();
        for _ in 0..100 {
            let n = udp_recv_batch(&b, &mut batch).expect("receive");
            for i in 0..n {
                got.push((batch.frame(i).0.to_vec(), batch.source(i)));
            }
            if got.len() == 3 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let from = Some(a.local_addr().expect("address"));
        let want: Vec<(Vec<u8>, Option<SocketAddr>)> =
            payloads.iter().map(|p| (p.to_vec(), from)).collect();
        assert_eq!(got, want);
        assert_eq!(udp_recv_batch(&b, &mut batch).expect("receive"), 0);
    }

    #[test]
    fn a_pinned_thread_runs_where_it_was_pinned() {
        std::thread::spawn(|| {
            let all = thread_cpus().expect("affinity");
            assert!(!all.is_empty());
            let last = *all.last().expect("a CPU");
            pin_thread(&[last]).expect("pin");
            assert_eq!(thread_cpus().expect("affinity"), [last]);
            std::thread::yield_now();
            assert_eq!(current_cpu().expect("cpu"), last);
            let beyond = pin_thread(&[libc::CPU_SETSIZE as usize]).expect_err("out of range");
            assert_eq!(beyond.kind(), io::ErrorKind::InvalidInput);
            assert_eq!(thread_cpus().expect("affinity"), [last], "unchanged");
        })
        .join()
        .expect("the thread");
    }
}
