//! QUIC-aware forwarding (MFT; draft-ietf-masque-quic-proxy-01): the
//! connection-ID state of each end. Long-header packets always go through
//! the tunnel; a short-header packet goes as plain UDP beside the tunnel
//! connection once both its connection IDs are registered, with its
//! destination CID rewritten to the virtual one the peer chose (the
//! identity transform: nothing else changes). An unregistered CID falls
//! back to the tunnel.
//!
//! The tunnel client learns the inner connection's CIDs from the long
//! headers it sees (the client's Initial carries the client CID as its
//! source; the server's replies carry the target CID): the inner packets
//! stay encrypted. Virtual CIDs are 8 bytes, a fixed 4-byte tag (one per
//! side) and a counter, so they cannot be a prefix of the tunnel
//! connection's own 8-byte CIDs unless its random 4-byte tag equals ours
//! (a 2⁻³² chance per run).

use crate::wire::capsule::Capsule;
use crate::wire::quic_header::{self, InnerHeader};

/// The tag of virtual client CIDs (chosen by the tunnel client).
const CLIENT_TAG: [u8; 4] = [0x7e, 0xcc, 0xc1, 0x1e];
/// The tag of virtual target CIDs (chosen by the tunnel server).
const TARGET_TAG: [u8; 4] = [0x7e, 0xcc, 0x7a, 0x26];

fn virtual_cid(tag: [u8; 4], counter: u32) -> Vec<u8> {
    let mut cid = tag.to_vec();
    cid.extend_from_slice(&counter.to_be_bytes());
    cid
}

/// Where an inner packet from the client's application goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Through the tunnel.
    Tunnel,
    /// Beside it, as this UDP payload (virtual target CID in place).
    Forward(Vec<u8>),
}

/// The tunnel client's forwarding state for one target.
#[derive(Clone, Debug, Default)]
pub struct ClientForwarding {
    /// (client CID, virtual client CID) registered.
    clients: Vec<(Vec<u8>, Vec<u8>)>,
    target_cid: Option<Vec<u8>>,
    virtual_target: Option<Vec<u8>>,
    next_virtual: u32,
    outgoing: Vec<Capsule>,
    /// Packets forwarded each way.
    pub forwarded: (u64, u64),
}

impl ClientForwarding {
    /// Capsules to send on the CONNECT stream.
    pub fn take_capsules(&mut self) -> Vec<Capsule> {
        std::mem::take(&mut self.outgoing)
    }

    /// Registers a client CID (one the application's QUIC endpoint issued,
    /// or the source of its long headers), once.
    pub fn register_client_cid(&mut self, cid: &[u8]) {
        if cid.is_empty() || self.clients.iter().any(|(c, _)| c == cid) || self.clients.len() >= 8 {
            return;
        }
        let virtual_cid = virtual_cid(CLIENT_TAG, self.next_virtual);
        self.next_virtual += 1;
        self.clients.push((cid.to_vec(), virtual_cid.clone()));
        self.outgoing.push(Capsule::RegisterClientCid {
            cid: cid.to_vec(),
            virtual_cid,
            reset_token: Vec::new(),
        });
    }

    /// An inner packet from the application: learns its client CID, and
    /// says whether it can be forwarded.
    pub fn outgoing(&mut self, packet: &[u8]) -> Route {
        match quic_header::parse(packet) {
            Ok(InnerHeader::Long { scid, .. }) => {
                self.register_client_cid(scid);
                Route::Tunnel
            }
            Ok(InnerHeader::Short) => {
                let (Some(target), Some(virtual_target)) = (&self.target_cid, &self.virtual_target)
                else {
                    return Route::Tunnel;
                };
                if !quic_header::short_dcid_is(packet, target) {
                    return Route::Tunnel;
                }
                match quic_header::rewrite_short_dcid(packet, target.len(), virtual_target) {
                    Some(rewritten) => {
                        self.forwarded.0 += 1;
                        Route::Forward(rewritten)
                    }
                    None => Route::Tunnel,
                }
            }
            Err(_) => Route::Tunnel,
        }
    }

    /// An inner packet that came through the tunnel: learns the target
    /// CID from a long header and registers it.
    pub fn tunnelled(&mut self, packet: &[u8]) {
        if let Ok(InnerHeader::Long { scid, .. }) = quic_header::parse(packet)
            && !scid.is_empty()
            && self.target_cid.as_deref() != Some(scid)
        {
            self.target_cid = Some(scid.to_vec());
            self.virtual_target = None;
            self.outgoing.push(Capsule::RegisterTargetCid {
                cid: scid.to_vec(),
                reset_token: Vec::new(),
            });
        }
    }

    /// A capsule from the proxy.
    pub fn on_capsule(&mut self, capsule: &Capsule) {
        match capsule {
            Capsule::AckTargetCid {
                cid, virtual_cid, ..
            } if self.target_cid.as_ref() == Some(cid) && !virtual_cid.is_empty() => {
                self.virtual_target = Some(virtual_cid.clone());
            }
            Capsule::CloseTargetCid { cid } if self.target_cid.as_ref() == Some(cid) => {
                self.virtual_target = None;
            }
            Capsule::CloseClientCid { cid } => self.clients.retain(|(c, _)| c != cid),
            _ => {}
        }
    }

    /// A plain UDP packet from the proxy: the inner packet, real client CID
    /// in place, if it carries our virtual client CID.
    pub fn forwarded(&mut self, packet: &[u8]) -> Option<Vec<u8>> {
        let (cid, virtual_cid) = self
            .clients
            .iter()
            .find(|(_, v)| quic_header::short_dcid_is(packet, v))?;
        let inner = quic_header::rewrite_short_dcid(packet, virtual_cid.len(), cid)?;
        self.forwarded.1 += 1;
        Some(inner)
    }
}

/// The tunnel server's forwarding state for one tunnel.
#[derive(Clone, Debug, Default)]
pub struct ServerForwarding {
    /// (client CID, virtual client CID).
    clients: Vec<(Vec<u8>, Vec<u8>)>,
    /// (virtual target CID, target CID).
    targets: Vec<(Vec<u8>, Vec<u8>)>,
    /// Packets forwarded each way.
    pub forwarded: (u64, u64),
}

/// The most CIDs one tunnel may register on each side.
const MAX_CIDS: usize = 8;

fn conflicts(a: &[u8], b: &[u8]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

impl ServerForwarding {
    /// A capsule from the client; returns the reply. `next_virtual` numbers
    /// the virtual target CIDs (unique across the server).
    pub fn on_capsule(&mut self, capsule: &Capsule, next_virtual: &mut u32) -> Option<Capsule> {
        match capsule {
            Capsule::RegisterClientCid {
                cid, virtual_cid, ..
            } => {
                let taken = self.clients.len() >= MAX_CIDS
                    || cid.is_empty()
                    || virtual_cid.is_empty()
                    || self
                        .clients
                        .iter()
                        .any(|(c, _)| c != cid && conflicts(c, cid));
                if taken {
                    return Some(Capsule::CloseClientCid { cid: cid.clone() });
                }
                self.clients.retain(|(c, _)| c != cid);
                self.clients.push((cid.clone(), virtual_cid.clone()));
                Some(Capsule::AckClientCid { cid: cid.clone() })
            }
            Capsule::RegisterTargetCid { cid, .. } => {
                if self.targets.len() >= MAX_CIDS || cid.is_empty() {
                    return Some(Capsule::CloseTargetCid { cid: cid.clone() });
                }
                let virtual_cid = virtual_cid(TARGET_TAG, *next_virtual);
                *next_virtual = next_virtual.wrapping_add(1);
                self.targets.retain(|(_, t)| t != cid);
                self.targets.push((virtual_cid.clone(), cid.clone()));
                Some(Capsule::AckTargetCid {
                    cid: cid.clone(),
                    virtual_cid,
                    reset_token: Vec::new(),
                })
            }
            Capsule::CloseClientCid { cid } => {
                self.clients.retain(|(c, _)| c != cid);
                None
            }
            Capsule::CloseTargetCid { cid } => {
                self.targets.retain(|(_, t)| t != cid);
                None
            }
            _ => None,
        }
    }

    /// A packet from the target: rewritten for forwarding to the client, if
    /// its destination CID is a registered client CID.
    pub fn from_target(&mut self, packet: &[u8]) -> Option<Vec<u8>> {
        let (cid, virtual_cid) = self
            .clients
            .iter()
            .find(|(cid, _)| quic_header::short_dcid_is(packet, cid))?;
        let rewritten = quic_header::rewrite_short_dcid(packet, cid.len(), virtual_cid)?;
        self.forwarded.1 += 1;
        Some(rewritten)
    }

    /// Whether a packet from the client carries one of our virtual target
    /// CIDs.
    pub fn is_forwarded(&self, packet: &[u8]) -> bool {
        self.targets
            .iter()
            .any(|(v, _)| quic_header::short_dcid_is(packet, v))
    }

    /// A forwarded packet from the client, rewritten for the target.
    pub fn from_client(&mut self, packet: &[u8]) -> Option<Vec<u8>> {
        let (virtual_cid, cid) = self
            .targets
            .iter()
            .find(|(v, _)| quic_header::short_dcid_is(packet, v))?;
        let rewritten = quic_header::rewrite_short_dcid(packet, virtual_cid.len(), cid)?;
        self.forwarded.0 += 1;
        Some(rewritten)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(scid: &[u8]) -> Vec<u8> {
        let mut p = vec![0xc0, 0, 0, 0, 1, 8];
        p.extend_from_slice(&[9; 8]);
        p.push(scid.len() as u8);
        p.extend_from_slice(scid);
        p.extend_from_slice(&[0; 20]);
        p
    }

    fn short(dcid: &[u8]) -> Vec<u8> {
        let mut p = vec![0x40];
        p.extend_from_slice(dcid);
        p.extend_from_slice(b"payload");
        p
    }

    #[test]
    fn registration_then_forwarding_both_ways_with_fallback() {
        let (client_cid, target_cid) = ([1u8; 8], [2u8; 8]);
        let mut client = ClientForwarding::default();
        let mut server = ServerForwarding::default();
        let mut next = 0;
        // Before registration everything is tunnelled.
        assert_eq!(client.outgoing(&short(&target_cid)), Route::Tunnel);
        assert_eq!(client.outgoing(&long(&client_cid)), Route::Tunnel);
        client.tunnelled(&long(&target_cid));
        for capsule in client.take_capsules() {
            let reply = server.on_capsule(&capsule, &mut next).unwrap();
            client.on_capsule(&reply);
        }
        // Client to target: virtual target CID on the wire, real one after.
        let Route::Forward(wire) = client.outgoing(&short(&target_cid)) else {
            panic!("not forwarded");
        };
        assert!(server.is_forwarded(&wire));
        assert_eq!(server.from_client(&wire).unwrap(), short(&target_cid));
        // Target to client: virtual client CID on the wire.
        let wire = server.from_target(&short(&client_cid)).unwrap();
        assert_ne!(wire, short(&client_cid));
        assert_eq!(client.forwarded(&wire).unwrap(), short(&client_cid));
        // An unregistered CID falls back to the tunnel.
        assert_eq!(client.outgoing(&short(&[3; 8])), Route::Tunnel);
        assert!(server.from_target(&short(&[4; 8])).is_none());
        assert_eq!((client.forwarded, server.forwarded), ((1, 1), (1, 1)));
    }

    #[test]
    fn conflicting_client_cids_are_refused() {
        let mut server = ServerForwarding::default();
        let mut next = 0;
        let register = |cid: &[u8]| Capsule::RegisterClientCid {
            cid: cid.to_vec(),
            virtual_cid: vec![5; 8],
            reset_token: vec![],
        };
        assert!(matches!(
            server.on_capsule(&register(&[1, 2, 3, 4]), &mut next),
            Some(Capsule::AckClientCid { .. })
        ));
        assert!(matches!(
            server.on_capsule(&register(&[1, 2]), &mut next),
            Some(Capsule::CloseClientCid { .. })
        ));
    }
}
