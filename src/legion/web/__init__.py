"""The web view (`legion web`, docs/web.md): the swarm's boards and the questions waiting for a
person, in a browser, live, behind a login."""
