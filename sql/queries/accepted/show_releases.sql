-- expect: class=show_releases columns=name,kind,source,mechanism,epsilon,delta,analyst,rows,created_at,status,parameters
SHOW RELEASES;
