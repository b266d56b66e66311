//! Keys that sign seals: Ed25519 key pairs, each half in a text file of its own.
//!
//! A key pair is kept as two files, as `ssh-keygen` and `minisign` keep theirs: `NAME`, the
//! private key, readable by its owner alone (mode 0600), and `NAME.pub`, the public key, to
//! hand to whoever verifies. Each file is one line:
//!
//! ```text
//! cobsfile-ed25519-secret-key 9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60
//! cobsfile-ed25519-public-key d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a
//! ```
//!
//! the kind of key, one space, and its 32 bytes in lower-case hexadecimal (the Ed25519 seed
//! of RFC 8032, and the public key it derives); then a line feed, optional. Nothing else is
//! accepted. A key is named by its **key id**, the first 8 bytes of the BLAKE3 hash of the
//! public key, in hexadecimal: what errors and reports show. Key bytes never appear in an
//! error, a `Debug` output or a file's metadata.

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

const SECRET_TAG: &str = "cobsfile-ed25519-secret-key";
const PUBLIC_TAG: &str = "cobsfile-ed25519-public-key";

/// The most bytes a key file may hold: its line, with room for a line ending.
const MAX_FILE: u64 = 256;

/// The private half of a key pair: signs seals. Its bytes are never shown.
#[derive(Clone)]
pub struct SealingKey {
    key: ed25519_dalek::SigningKey,
}

/// The public half of a key pair: verifies seals.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct VerifyingKey {
    key: ed25519_dalek::VerifyingKey,
}

/// A key's id: the first 8 bytes of the BLAKE3 hash of its public key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId(pub [u8; 8]);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl SealingKey {
    /// A new key pair from the operating system's random source.
    pub fn generate() -> Result<SealingKey> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed)
            .map_err(|e| io::Error::other(format!("no random bytes for a key: {e}")))?;
        Ok(SealingKey::from_seed(seed))
    }

    /// The key pair whose Ed25519 seed (RFC 8032's private key) is `seed`.
    pub fn from_seed(seed: [u8; 32]) -> SealingKey {
        SealingKey {
            key: ed25519_dalek::SigningKey::from_bytes(&seed),
        }
    }

    /// The private key in the file at `path`. Refused if the file is a key of another kind,
    /// malformed, or (on Unix) readable or writable by anyone but its owner.
    pub fn read(path: impl AsRef<Path>) -> Result<SealingKey> {
        let path = path.as_ref();
        SealingKey::from_file_text(path, &read_key_file(path)?)
    }

    /// The private key in `text`, read from the file at `path`.
    fn from_file_text(path: &Path, text: &str) -> Result<SealingKey> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(key_error(
                    path,
                    format!(
                        "others can read or write this private key (mode {mode:03o}); \
                         `chmod 600` it"
                    ),
                ));
            }
        }
        let seed = parse_line(path, text, SECRET_TAG)?;
        Ok(SealingKey::from_seed(seed))
    }

    /// Writes the private key to `path` (created; mode 0600 on Unix) and the public key to
    /// `path` with `.pub` appended (created), each synced. Neither may exist: a key is never
    /// overwritten.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let public = public_path(path);
        for p in [path, public.as_path()] {
            if p.symlink_metadata().is_ok() {
                return Err(key_error(p, "exists; a key is never overwritten".into()));
            }
        }
        let secret = format!("{SECRET_TAG} {}\n", hex(&self.key.to_bytes()));
        create_new(path, secret.as_bytes(), true)?;
        let line = format!(
            "{PUBLIC_TAG} {}\n",
            hex(self.verifying_key().key.as_bytes())
        );
        create_new(&public, line.as_bytes(), false)
    }

    /// The public half.
    pub fn verifying_key(&self) -> VerifyingKey {
        VerifyingKey {
            key: self.key.verifying_key(),
        }
    }

    /// The key's id.
    pub fn id(&self) -> KeyId {
        self.verifying_key().id()
    }

    /// The Ed25519 signature of `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        use ed25519_dalek::Signer;
        self.key.sign(message).to_bytes()
    }
}

impl fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealingKey({})", self.id())
    }
}

impl VerifyingKey {
    /// The public key in the file at `path` (a public key file, `NAME.pub`).
    pub fn read(path: impl AsRef<Path>) -> Result<VerifyingKey> {
        let path = path.as_ref();
        let text = read_key_file(path)?;
        if text.starts_with(SECRET_TAG) {
            return Err(key_error(
                path,
                "a private key where a public key is needed (give NAME.pub)".into(),
            ));
        }
        VerifyingKey::from_file_text(path, &text)
    }

    /// The public key in `text`, read from the file at `path`.
    fn from_file_text(path: &Path, text: &str) -> Result<VerifyingKey> {
        let bytes = parse_line(path, text, PUBLIC_TAG)?;
        VerifyingKey::from_bytes(bytes).map_err(|problem| key_error(path, problem))
    }

    /// The public key of these 32 bytes (RFC 8032's encoding), if they are one.
    pub fn from_bytes(bytes: [u8; 32]) -> std::result::Result<VerifyingKey, String> {
        ed25519_dalek::VerifyingKey::from_bytes(&bytes)
            .map(|key| VerifyingKey { key })
            .map_err(|_| "not an Ed25519 public key (not a point of the curve)".to_owned())
    }

    /// The key's 32 bytes.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// The key's id.
    pub fn id(&self) -> KeyId {
        let hash = blake3::hash(self.key.as_bytes());
        let mut id = [0u8; 8];
        id.copy_from_slice(&hash.as_bytes()[..8]);
        KeyId(id)
    }

    /// Whether `signature` is this key's signature of `message` (RFC 8032, with the checks
    /// that refuse malleable signatures and weak keys).
    pub fn verifies(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        let signature = ed25519_dalek::Signature::from_bytes(signature);
        self.key.verify_strict(message, &signature).is_ok()
    }
}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VerifyingKey({})", self.id())
    }
}

impl KeyId {
    /// The id of the key in the file at `path`: a private key file (refused, as by
    /// [`SealingKey::read`], if others can read it) or a public one.
    pub fn of_file(path: impl AsRef<Path>) -> Result<KeyId> {
        let path = path.as_ref();
        let text = read_key_file(path)?;
        if text.starts_with(SECRET_TAG) {
            return SealingKey::from_file_text(path, &text).map(|key| key.id());
        }
        VerifyingKey::from_file_text(path, &text).map(|key| key.id())
    }
}

/// `path` with `.pub` appended: where the public half of the key at `path` is kept.
pub fn public_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

/// An I/O error in a few words, without the system's error number.
fn io_problem(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "no such file".into(),
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        io::ErrorKind::AlreadyExists => "exists; a key is never overwritten".into(),
        io::ErrorKind::IsADirectory => "is a directory".into(),
        _ => {
            let text = e.to_string();
            match text.rfind(" (os error ") {
                Some(at) => text[..at].to_owned(),
                None => text,
            }
        }
    }
}

fn key_error(path: &Path, problem: String) -> Error {
    Error::Key {
        path: path.to_path_buf(),
        problem,
    }
}

/// The text of a key file: at most [`MAX_FILE`] bytes of UTF-8.
fn read_key_file(path: &Path) -> Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| key_error(path, io_problem(&e)))?;
    if !file.metadata()?.is_file() {
        return Err(key_error(path, "not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| key_error(path, io_problem(&e)))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(key_error(path, "not a key file (too long)".into()));
    }
    String::from_utf8(bytes).map_err(|_| key_error(path, "not a key file (not text)".into()))
}

/// The 32 bytes of a key file's line `TAG HEX`, with an optional line feed after it.
fn parse_line(path: &Path, text: &str, tag: &str) -> Result<[u8; 32]> {
    let line = text.strip_suffix('\n').unwrap_or(text);
    let line = line.strip_suffix('\r').unwrap_or(line);
    let Some(hex) = line
        .strip_prefix(tag)
        .and_then(|rest| rest.strip_prefix(' '))
    else {
        let what = if tag == SECRET_TAG {
            "private"
        } else {
            "public"
        };
        return Err(key_error(
            path,
            format!("not a cobsfile {what} key file (its line starts with `{tag} `)"),
        ));
    };
    unhex(hex.as_bytes()).ok_or_else(|| {
        key_error(
            path,
            "malformed key (64 hexadecimal digits expected)".into(),
        )
    })
}

/// `bytes` in lowercase hexadecimal: how key files, file ids and seal hashes are written.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `N` bytes that exactly `2 * N` lowercase hexadecimal digits spell, if they are that.
pub(crate) fn unhex<const N: usize>(text: &[u8]) -> Option<[u8; N]> {
    let digits = text;
    if digits.len() != 2 * N {
        return None;
    }
    let value = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        out[i] = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(out)
}

/// Creates `path` (failing if it exists) holding `bytes`, synced; readable by its owner alone
/// if `private` (on Unix).
fn create_new(path: &Path, bytes: &[u8], private: bool) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(if private { 0o600 } else { 0o644 });
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut file = options
        .open(path)
        .map_err(|e| key_error(path, io_problem(&e)))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8032, section 7.1, test 1: the seed, its public key and the signature of the empty
    /// message.
    #[test]
    fn rfc_8032_test_1() {
        let seed =
            unhex(b"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60").unwrap();
        let key = SealingKey::from_seed(seed);
        assert_eq!(
            hex(&key.verifying_key().to_bytes()),
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
        );
        let signature = key.sign(b"");
        assert_eq!(
            hex(&signature),
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        );
        assert!(key.verifying_key().verifies(b"", &signature));
        assert!(!key.verifying_key().verifies(b"x", &signature));
    }

    #[test]
    fn key_bytes_are_never_shown() {
        let key = SealingKey::from_seed([7; 32]);
        let shown = format!("{key:?} {:?}", key.verifying_key());
        assert!(!shown.contains(&hex(&[7; 32])));
        assert!(!shown.contains(&hex(&key.verifying_key().to_bytes())));
        assert!(shown.contains(&key.id().to_string()));
    }

    #[test]
    fn hex_is_lower_case_and_exact() {
        assert!(unhex::<32>("ab".repeat(32).as_bytes()).is_some());
        assert!(unhex::<32>("AB".repeat(32).as_bytes()).is_none());
        assert!(unhex::<32>("ab".repeat(31).as_bytes()).is_none());
        assert!(unhex::<32>(format!("{}g0", "ab".repeat(31)).as_bytes()).is_none());
    }
}
