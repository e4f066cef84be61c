//! A UDP server's sockets for several worker threads: one socket per
//! worker on one address (`SO_REUSEPORT`), the kernel steering each QUIC
//! packet to the worker its destination connection ID names (a classic BPF
//! program, `SO_ATTACH_REUSEPORT_CBPF`), and segmentation offload on send
//! (`UDP_SEGMENT`): one system call for a run of equal-sized datagrams to
//! one destination.

use super::{check, sockaddr};
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// `SO_ATTACH_REUSEPORT_CBPF` (asm-generic/socket.h).
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;
/// `UDP_SEGMENT` (linux/udp.h).
const UDP_SEGMENT: libc::c_int = 103;
/// The most segments one `UDP_SEGMENT` send may carry (`UDP_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: usize = 64;

/// Classic BPF opcodes.
const LD_B_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const RET_A: u16 = (libc::BPF_RET | libc::BPF_A) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// One classic BPF instruction.
fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The steering program. It runs on the UDP payload and returns the index
/// of the socket in the group: the first byte of the destination
/// connection ID (short header: byte 1; long header: byte 6, after the
/// version and the ID's length). An index beyond the group (or a long
/// header without an ID) falls back to the kernel's hash of the 4-tuple.
fn cid_program() -> [libc::sock_filter; 9] {
    [
        op(LD_B_ABS, 0, 0, 0),
        op(JSET_K, 2, 0, 0x80),
        op(LD_B_ABS, 0, 0, 1),
        op(RET_A, 0, 0, 0),
        op(LD_B_ABS, 0, 0, 5),
        op(JEQ_K, 2, 0, 0),
        op(LD_B_ABS, 0, 0, 6),
        op(RET_A, 0, 0, 0),
        op(RET_K, 0, 0, u32::MAX),
    ]
}

/// A non-blocking UDP socket bound to `addr` with `SO_REUSEPORT`, in the
/// group of every such socket on `addr`; the group steers each QUIC packet
/// by the first byte of its destination connection ID (the n-th socket
/// bound gets the packets whose byte is n). `recv_buffer` sizes its
/// receive buffer (bytes; the kernel may cap it).
pub fn udp_steered_by_cid(addr: SocketAddr, recv_buffer: usize) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_port(true)?;
    let _ = socket.set_recv_buffer_size(recv_buffer);
    let _ = socket.set_send_buffer_size(recv_buffer);
    // Bound first: a socket with a group of its own (which attaching a
    // program makes) cannot join another's.
    socket.bind(&addr.into())?;
    let mut program = cid_program();
    let fprog = libc::sock_fprog {
        len: program.len() as libc::c_ushort,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: `fprog` points at `program`, both alive for the call; the
    // kernel copies the program.
    check(unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    })?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Sends `bytes` to `dst` as datagrams of `segment` bytes each (the last
/// may be shorter) with one `sendmsg` (`UDP_SEGMENT`; at most
/// [`MAX_SEGMENTS`] of them). Returns false when the socket's buffer is
/// full; an error when the kernel refuses segmentation offload (then send
/// them one by one).
pub fn udp_send_segments(
    socket: &UdpSocket,
    bytes: &[u8],
    segment: u16,
    dst: SocketAddr,
) -> io::Result<bool> {
    let (mut name, name_len) = sockaddr(dst);
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // One cmsghdr and a u16, 8-byte aligned (CMSG_SPACE(2) is 24 on
    // 64-bit Linux).
    let mut control = [0u64; 4];
    // SAFETY: an all-zero msghdr is valid; every pointer set below points
    // at a local that outlives the sendmsg call, and the CMSG macros stay
    // within `control`, which is larger than CMSG_SPACE(2).
    let ret = unsafe {
        let mut header: libc::msghdr = std::mem::zeroed();
        header.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
        header.msg_namelen = name_len;
        header.msg_iov = &mut iov;
        header.msg_iovlen = 1;
        header.msg_control = control.as_mut_ptr().cast();
        header.msg_controllen = libc::CMSG_SPACE(2) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(&header);
        (*cmsg).cmsg_level = libc::SOL_UDP;
        (*cmsg).cmsg_type = UDP_SEGMENT;
        (*cmsg).cmsg_len = libc::CMSG_LEN(2) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment);
        libc::sendmsg(socket.as_raw_fd(), &header, libc::MSG_DONTWAIT)
    };
    if ret < 0 {
        let error = io::Error::last_os_error();
        return match error.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(false),
            _ => Err(error),
        };
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::{RecvBatch, udp_recv_batch};
    use std::time::Duration;

    /// Receives `want` datagrams from `socket` (waiting up to a second).
    fn receive(socket: &UdpSocket, want: usize) -> Vec<Vec<u8>> {
        let mut batch = RecvBatch::new(64, 2048);
        let mut got = Vec::new();
        for _ in 0..1000 {
            let n = udp_recv_batch(socket, &mut batch).expect("receive");
            got.extend((0..n).map(|i| batch.frame(i).0.to_vec()));
            if got.len() >= want {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        got
    }

    /// A short-header packet whose destination connection ID starts with
    /// `byte`.
    fn short(byte: u8) -> Vec<u8> {
        vec![0x40, byte, 1, 2, 3, 4, 5, 6, 7, 8]
    }

    #[test]
    fn packets_reach_the_socket_their_connection_id_names() {
        let first = udp_steered_by_cid("127.0.0.1:24497".parse().unwrap(), 1 << 20).expect("bind");
        let addr = first.local_addr().expect("address");
        let second = udp_steered_by_cid(addr, 1 << 20).expect("bind the second");
        let sender = UdpSocket::bind("127.0.0.1:0").expect("bind");
        for byte in [0u8, 1, 1, 0, 1] {
            sender.send_to(&short(byte), addr).expect("send");
        }
        // A long header (an Initial) whose ID starts with 1.
        let long = [0xc0, 0, 0, 0, 1, 8, 1, 9, 9, 9, 9, 9, 9, 9];
        sender.send_to(&long, addr).expect("send");
        let firsts = receive(&first, 2);
        let seconds = receive(&second, 4);
        assert_eq!(firsts, vec![short(0), short(0)]);
        assert_eq!(seconds, vec![short(1), short(1), short(1), long.to_vec()]);
    }

    #[test]
    fn a_segmented_send_arrives_as_separate_datagrams() {
        let receiver = UdpSocket::bind("127.0.0.1:0").expect("bind");
        receiver.set_nonblocking(true).expect("non-blocking");
        let sender = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let bytes: Vec<u8> = (0..250u8).collect();
        let to = receiver.local_addr().expect("address");
        assert!(udp_send_segments(&sender, &bytes, 100, to).expect("send"));
        let got = receive(&receiver, 3);
        let want: Vec<Vec<u8>> = bytes.chunks(100).map(<[u8]>::to_vec).collect();
        assert_eq!(got, want);
    }
}
