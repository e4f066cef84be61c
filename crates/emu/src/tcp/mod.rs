//! Linux TCP: the baselines of the papers. [`bulk`] is the bulk transfer
//! protocol on kernel TCP sockets (a client and a server), [`pep`] the
//! transparent split-connection TCP PEP (`pepkit tcp-pep`).

pub mod bulk;
pub mod pep;
