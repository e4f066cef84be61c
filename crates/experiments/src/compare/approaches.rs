//! The approaches `pepkit compare` runs, as data: each is a name and the
//! lines of scenario TOML that make a variant of it, with where its middle
//! system sits. Nothing else in `compare` knows a system or a controller
//! by name.

/// Which of compare's two tables an approach belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// Every way to carry the traffic over the path: end to end, with a
    /// middle system, through a tunnel, over TCP.
    Approaches,
    /// Congestion controllers alone on the path, and scavengers beside a
    /// primary.
    Controllers,
}

/// Where an approach's middle system sits, relative to the path's lossy
/// hop and the direction the data goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// No middle system: the node routes.
    Nowhere,
    /// So that the lossy hop lies between the system and the data
    /// receiver (it sees every packet first and repairs what the hop
    /// loses).
    BeforeLoss,
    /// So that the lossy hop lies between the client and the system,
    /// whichever way the data goes: a tunnel from beside the client to the
    /// system covers it, and the sidekick's quACKs cover it from either end
    /// (its proxy quACKs an uploading client; the client quACKs its relay,
    /// which resends a download).
    ClientSideLoss,
    /// Next to the lossy hop, on its server side where there is a node,
    /// else on its client side (it splits the path there).
    NextToLoss,
}

/// One approach: a variant of the compared scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Approach {
    /// Its name, as the table and the plots show it.
    pub name: &'static str,
    /// Its table.
    pub group: Group,
    /// Scenario TOML merged over the path and workload; `sender.` stands
    /// for the data sender's endpoint (`client.` or `server.`, from the
    /// workload), `receiver.` for the other.
    pub toml: &'static str,
    /// Where its middle system sits.
    pub place: Place,
    /// Runs on the path collapsed into one shared hop behind an access
    /// hop per flow (its `[[flows]]` compete there).
    pub shared_hop: bool,
    /// The flow whose metrics are the row's (`None`: the one flow).
    pub measured: Option<&'static str>,
    /// Another flow whose headline metric the row shows beside its own.
    pub beside: Option<&'static str>,
}

const fn approach(name: &'static str, toml: &'static str, place: Place) -> Approach {
    Approach {
        name,
        group: Group::Approaches,
        toml,
        place,
        shared_hop: false,
        measured: None,
        beside: None,
    }
}

const fn controller(name: &'static str, toml: &'static str) -> Approach {
    Approach {
        name,
        group: Group::Controllers,
        toml,
        place: Place::Nowhere,
        shared_hop: false,
        measured: None,
        beside: None,
    }
}

const fn scavenger(name: &'static str, toml: &'static str) -> Approach {
    Approach {
        name,
        group: Group::Controllers,
        toml,
        place: Place::Nowhere,
        shared_hop: true,
        measured: Some("scavenger"),
        beside: Some("primary"),
    }
}

/// The name of the row every other row of the approaches table is
/// compared with.
pub const BASELINE: &str = "QUIC CUBIC (e2e)";

/// The name of the row every other row of the controllers table is
/// compared with.
pub const CONTROLLER_BASELINE: &str = "CUBIC";

/// Every approach, in table order; the first of each group is its
/// baseline.
pub const APPROACHES: &[Approach] = &[
    approach(
        BASELINE,
        "client.controller = \"cubic\"\nserver.controller = \"cubic\"",
        Place::Nowhere,
    ),
    approach(
        "QUIC BBR (e2e)",
        "client.controller = \"bbr\"\nserver.controller = \"bbr\"",
        Place::Nowhere,
    ),
    approach(
        "QUIC + Sidekick",
        "middle = { kind = \"sidekick\", interval = \"30ms\", threshold = 10 }\n\
         sender.controller = \"pacubic\"",
        Place::ClientSideLoss,
    ),
    approach(
        "QUIC + PEMI",
        "middle = { kind = \"pemi\" }",
        Place::BeforeLoss,
    ),
    approach(
        "split QUIC",
        "middle = { kind = \"split\" }",
        Place::NextToLoss,
    ),
    approach(
        "TECC tunnel, MFT",
        "middle = { kind = \"tecc\", mode = \"mft\" }",
        Place::ClientSideLoss,
    ),
    approach(
        "TECC tunnel, RMDT",
        "middle = { kind = \"tecc\", mode = \"rmdt\" }",
        Place::ClientSideLoss,
    ),
    approach(
        "TECC tunnel, TECC",
        "middle = { kind = \"tecc\", mode = \"tecc\" }\nsender.controller = \"tecc\"",
        Place::ClientSideLoss,
    ),
    approach(
        "TCP CUBIC (e2e)",
        "transport = \"tcp\"\nclient.controller = \"cubic\"\nserver.controller = \"cubic\"",
        Place::Nowhere,
    ),
    approach(
        "TCP + PEP",
        "transport = \"tcp\"\nclient.controller = \"cubic\"\nserver.controller = \"cubic\"\n\
         middle = { kind = \"pep\" }",
        Place::NextToLoss,
    ),
    controller(CONTROLLER_BASELINE, "sender.controller = \"cubic\""),
    controller("BBR", "sender.controller = \"bbr\""),
    controller("Copa", "sender.controller = \"copa\""),
    controller("PCC Vivace", "sender.controller = \"vivace\""),
    controller("Proteus-P", "sender.controller = \"proteus-p\""),
    scavenger(
        "Proteus-S beside CUBIC",
        "flows = [{ name = \"primary\", controller = \"cubic\" }, \
         { name = \"scavenger\", controller = \"proteus-s\" }]",
    ),
    scavenger(
        "LEDBAT beside CUBIC",
        "flows = [{ name = \"primary\", controller = \"cubic\" }, \
         { name = \"scavenger\", controller = \"ledbat\" }]",
    ),
];

/// The approaches of `group`, in table order.
pub fn of(group: Group) -> impl Iterator<Item = &'static Approach> {
    APPROACHES.iter().filter(move |a| a.group == group)
}
