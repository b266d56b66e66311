//! `cobsfile key`: the key pairs that sign seals.

use std::path::PathBuf;

use cobsfile::key::{public_path, KeyId, SealingKey};

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
            let id = KeyId::of_file(&args.key).map_err(failure)?;
            println!("{id}");
        }
    }
    Ok(Outcome::Clean)
}

fn failure(e: cobsfile::Error) -> Failure {
    Failure::new(e.to_string())
}
