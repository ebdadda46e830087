//! `bosun-fakekube`: a fake Kubernetes API server for tests. See the library docs
//! (`bosun_fakekube`) for what it models and `--help` for the arguments.

fn main() {
    let args = match bosun_fakekube::server::Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = runtime.block_on(bosun_fakekube::server::run(args)) {
        eprintln!("bosun-fakekube: {e}");
        std::process::exit(1);
    }
}
