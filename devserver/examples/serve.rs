//! Runs a development API server until Ctrl-C: `cargo run -p kubewasm-devserver --example serve
//! -- [PORT] [MANIFESTS_DIR]`; prints a kubeconfig. Set `RUST_LOG=kubewasm_devserver=debug` to
//! see every request.

use kubewasm_devserver::{DevServer, Options};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let mut args = std::env::args().skip(1);
    let port = match args.next() {
        Some(p) => p.parse()?,
        None => 0,
    };
    let server = DevServer::start(Options {
        port,
        ..Options::default()
    })
    .await?;
    if let Some(dir) = args.next() {
        let count = server.load_manifests(std::path::Path::new(&dir))?;
        eprintln!("created {count} objects from {dir}");
    }
    println!("{}", server.kubeconfig_yaml());
    tokio::signal::ctrl_c().await?;
    server.shutdown().await;
    Ok(())
}
