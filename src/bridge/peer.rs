//! Which local process is on the other end of a bridge connection (Linux `/proc`): used only
//! for a request without the bridge key, to tell the agent pvisor started (a wrong key: the
//! run fails) from any other process (answered 401 and ignored).

use std::net::SocketAddr;

/// The pid holding the socket whose local address is `peer` and remote address `local`
/// (the client end of a connection accepted at `local` from `peer`). IPv4 only.
pub fn peer_pid(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    let inode = client_inode(local, peer)?;
    let want = format!("socket:[{inode}]");
    for proc_entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = proc_entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(proc_entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|t| t.as_os_str() == want.as_str()) {
                return Some(pid);
            }
        }
    }
    None
}

/// The process group of `pid`.
pub fn process_group(pid: u32) -> Option<u32> {
    // SAFETY: getpgid has no memory effects; a stale pid gives -1.
    let g = unsafe { libc::getpgid(pid as libc::pid_t) };
    (g > 0).then_some(g as u32)
}

/// `/proc/net/tcp` spelling of an IPv4 socket address: `0100007F:1F90`.
fn proc_hex(a: SocketAddr) -> Option<String> {
    match a {
        SocketAddr::V4(v4) => Some(format!(
            "{:08X}:{:04X}",
            u32::from_le_bytes(v4.ip().octets()),
            v4.port()
        )),
        SocketAddr::V6(_) => None,
    }
}

fn client_inode(local: SocketAddr, peer: SocketAddr) -> Option<u64> {
    let (l, p) = (proc_hex(local)?, proc_hex(peer)?);
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // f[1] local_address, f[2] rem_address, f[9] inode
        (f.len() > 9 && f[1] == p && f[2] == l)
            .then(|| f[9].parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_this_process_on_both_ends_of_a_loopback_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let _client = std::net::TcpStream::connect(local).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        assert_eq!(peer_pid(local, peer), Some(std::process::id()));
        assert_eq!(
            process_group(std::process::id()),
            Some(unsafe { libc::getpgrp() } as u32)
        );
        assert_eq!(proc_hex(local).unwrap().len(), 13);
    }
}
