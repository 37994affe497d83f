//! What every reconcile shares: the write limit, and the chat statuses remembered until the
//! cache shows them.

use std::time::Duration;

use super::fixtures::World;
use model::resources::ChannelStatus;

#[tokio::test]
async fn a_write_waits_for_a_turn_when_the_limit_is_in_flight() {
    let (ctx, _api) = World::echo().context();
    // The fixture's limit is 8.
    let turns: Vec<_> = futures::future::join_all((0..8).map(|_| ctx.write_permit())).await;
    let waited = tokio::time::timeout(Duration::from_millis(50), ctx.write_permit()).await;
    assert!(
        waited.is_err(),
        "a ninth write went out with eight in flight"
    );
    drop(turns);
    let _turn = tokio::time::timeout(Duration::from_millis(50), ctx.write_permit())
        .await
        .expect("a turn is free once the writes in flight are done");
}

#[tokio::test]
async fn a_chat_status_written_is_read_until_the_cache_moves_past_it_then_forgotten() {
    let world = World::echo();
    let (ctx, _api) = world.context();
    let mut channel = (*world.channel("general")).clone();
    channel.metadata.resource_version = Some("10".into());
    let wrote = ChannelStatus {
        plugins: vec!["echo".into()],
        ..Default::default()
    };
    ctx.wrote_chat_status(&channel, wrote.clone());
    assert_eq!(
        ctx.chat_status(&channel),
        wrote,
        "the cache still shows version 10"
    );

    // The cache shows our write (version 11, with what the server made of it).
    channel.metadata.resource_version = Some("11".into());
    let served = ChannelStatus {
        plugins: vec!["echo".into()],
        observed_generation: Some(1),
        ..Default::default()
    };
    channel.status = Some(served.clone());
    assert_eq!(ctx.chat_status(&channel), served);

    // Forgotten: a cache that went back to version 10 (a relist) is read as it is.
    channel.metadata.resource_version = Some("10".into());
    channel.status = None;
    assert_eq!(ctx.chat_status(&channel), ChannelStatus::default());
}
