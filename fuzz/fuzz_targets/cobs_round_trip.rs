//! COBS: encoding never emits 0x00 and decodes back exactly; decoding arbitrary bytes never
//! panics nor grows past its input.
#![no_main]

use cobsfile::cobs;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut encoded = Vec::new();
    cobs::encode(data, &mut encoded);
    assert!(!encoded.contains(&0));
    assert!(encoded.len() <= cobs::max_encoded_len(data.len()));
    let mut decoded = Vec::new();
    cobs::decode(&encoded, &mut decoded).unwrap();
    assert_eq!(decoded, data);
    if cobs::decode(data, &mut decoded).is_ok() {
        assert!(decoded.len() <= data.len());
    }
});
