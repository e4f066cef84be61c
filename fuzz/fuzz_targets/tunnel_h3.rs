//! Feeds arbitrary bytes to the HTTP/3 frame reader (in two pieces, to
//! exercise the streaming states) and decodes every HEADERS payload as a
//! QPACK field section: nothing panics, and no field section decodes to
//! more than the advertised limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tunnel::wire::h3::{FrameEvent, FrameReader};
use tunnel::wire::qpack;

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let mut reader = FrameReader::default();
    let mut events = Vec::new();
    if reader.push(&data[..split], &mut events).is_ok() {
        let _ = reader.push(&data[split..], &mut events);
    }
    for event in events {
        if let FrameEvent::Headers(section) = event
            && let Ok(fields) = qpack::decode(&section)
        {
            let size: usize = fields.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
            assert!(size <= qpack::MAX_FIELD_SECTION);
        }
    }
    let _ = qpack::decode(data);
});
