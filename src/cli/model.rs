//! `pvisor model serve`: the built-in scripted model server on 127.0.0.1, standalone (to run a
//! real agent CLI against a script by hand, or to debug a script).

use std::path::PathBuf;

use clap::Subcommand;

use super::error::CliError;
use super::exit;
use crate::scripted::{start, Script, ServerOptions};

#[derive(Debug, Subcommand)]
pub enum ModelCmd {
    /// Serve a model script (Anthropic Messages, OpenAI Responses and Chat Completions) on
    /// 127.0.0.1 until interrupted; prints the base URL on stdout.
    Serve {
        /// The model script (docs/model-script.md).
        #[arg(long)]
        script: PathBuf,
        /// Port on 127.0.0.1 (0 picks a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Append every request as one JSON line to this file.
        #[arg(long)]
        log: Option<PathBuf>,
        /// Require the API key held by this environment variable.
        #[arg(long)]
        api_key_env: Option<String>,
        /// `NAME=VALUE` substitutions for `${NAME}` in the script (e.g. `CWD=/work`).
        #[arg(long = "var", value_name = "NAME=VALUE")]
        vars: Vec<String>,
    },
}

pub fn run(cmd: ModelCmd) -> Result<i32, CliError> {
    let ModelCmd::Serve {
        script,
        port,
        log,
        api_key_env,
        vars,
    } = cmd;
    let config = |m: String| CliError::new(exit::CONFIGURATION, m, None);
    let mut s = Script::from_path(&script)
        .map_err(|e| config(format!("--script {}: {e}", script.display())))?;
    let pairs: Vec<(String, String)> = vars
        .iter()
        .map(|v| {
            v.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| config(format!("--var {v}: expected NAME=VALUE")))
        })
        .collect::<Result<_, _>>()?;
    if !pairs.is_empty() {
        let refs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        s = s.substitute(&refs);
    }
    let api_key = match api_key_env {
        Some(var) => Some(
            std::env::var(&var)
                .map_err(|_| config(format!("--api-key-env {var}: the variable is not set")))?,
        ),
        None => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(exit::INTERNAL, format!("tokio runtime: {e}"), None))?;
    rt.block_on(async move {
        let opts = ServerOptions {
            port,
            log_path: log,
            api_key,
            ..Default::default()
        };
        let server = start(s, opts).await.map_err(|e| {
            CliError::new(
                exit::CONFIGURATION,
                e.to_string(),
                Some("pick another --port, or 0 for a free one".into()),
            )
        })?;
        println!("{}", server.base_url());
        let _ = tokio::signal::ctrl_c().await;
        server.shutdown().await;
        Ok(exit::OK)
    })
}
