//! `cobsfile key`: the key pairs that sign seals.

use std::path::PathBuf;

use cobsfile::key::{public_path, SealingKey, VerifyingKey};

use super::{Failure, Outcome};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Generate a key pair: NAME, the private key (readable by you alone, mode 0600), and
    /// NAME.pub, the public key to give whoever verifies. Each is one line of text:
    /// `cobsfile-ed25519-secret-key HEX` or `cobsfile-ed25519-public-key HEX`. Neither file is
    /// ever overwritten.
    Generate(GenerateArgs),
    /// Print a key's id (the first 8 bytes of the BLAKE3 hash of its public key, as reports
    /// name keys), from its private or its public key file.
    Id(IdArgs),
}

#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    /// Where to write the private key; the public key goes to NAME.pub.
    #[arg(short, long, value_name = "NAME")]
    output: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct IdArgs {
    /// A key file: NAME or NAME.pub.
    #[arg(value_name = "KEY")]
    key: PathBuf,
}

pub fn run(command: Command) -> Result<Outcome, Failure> {
    match command {
        Command::Generate(args) => {
            let key = SealingKey::generate().map_err(failure)?;
            key.write(&args.output).map_err(failure)?;
            println!(
                "{}: private key; {}: public key; key id {}",
                args.output.display(),
                public_path(&args.output).display(),
                key.id()
            );
        }
        Command::Id(args) => {
            let id = match VerifyingKey::read(&args.key) {
                Ok(key) => key.id(),
                // A private key file: its id, if it is one and only its owner can read it.
                Err(cobsfile::Error::Key { .. }) if is_private(&args.key) => {
                    SealingKey::read(&args.key).map_err(failure)?.id()
                }
                Err(e) => return Err(failure(e)),
            };
            println!("{id}");
        }
    }
    Ok(Outcome::Clean)
}

/// Whether the file at `path` starts as a private key file does.
fn is_private(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut start = [0u8; 27];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut start))
        .is_ok_and(|()| &start == b"cobsfile-ed25519-secret-key")
}

fn failure(e: cobsfile::Error) -> Failure {
    Failure::new(e.to_string())
}
